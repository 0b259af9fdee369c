/**
 * Loads data from the API and keeps it fresh: again on `reload()`, and every
 * `everyMs` while the page is visible (live updates without a socket).
 */
import { useCallback, useEffect, useRef, useState } from "react"
import type { Result } from "../api.js"

export interface Loaded<A> {
  readonly data: A | undefined
  readonly error: string | undefined
  readonly loading: boolean
  readonly reload: () => void
}

export const useLoad = <A,>(load: () => Promise<Result<A>>, deps: ReadonlyArray<unknown>, everyMs?: number): Loaded<A> => {
  const [data, setData] = useState<A | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)
  const [loading, setLoading] = useState(true)
  const latest = useRef(0)

  const reload = useCallback(() => {
    const ticket = ++latest.current
    void load().then((result) => {
      // An older answer arriving late never replaces a newer one.
      if (ticket !== latest.current) return
      if (result.ok) {
        setData(result.value)
        setError(undefined)
      } else setError(result.error)
      setLoading(false)
    })
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, deps)

  useEffect(() => {
    reload()
    if (everyMs === undefined) return
    const timer = window.setInterval(() => {
      if (document.visibilityState === "visible") reload()
    }, everyMs)
    return () => window.clearInterval(timer)
  }, [reload, everyMs])

  return { data, error, loading, reload }
}
