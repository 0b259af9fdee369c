/**
 * Whether an exchange was written on a connection that had already carried a
 * request: a kept-alive one, which the server may close just as it is reused.
 *
 * undici names the socket a request is written to only on its diagnostics
 * channel `undici:client:sendHeaders`, published synchronously right after the
 * handler's `onRequestStart` for the same request: the exchange that started
 * last is the one being written. Should a later undici break that order, no
 * exchange is seen as reused and none is sent again (the safe side).
 */
import * as diagnostics from "node:diagnostics_channel"

/** Filled in when undici writes the request. */
export interface Written {
  reused: boolean
}

// Sockets that have carried a request; weak, so closed sockets are forgotten.
const carried = new WeakSet<object>()
let starting: Written | undefined
let subscribed = false

const onSendHeaders = (message: unknown): void => {
  const written = starting
  starting = undefined
  if (written === undefined || typeof message !== "object" || message === null || !("socket" in message)) return
  const socket = message.socket
  if (typeof socket !== "object" || socket === null) return
  written.reused = carried.has(socket)
  carried.add(socket)
}

/** Call from `onRequestStart`: `written.reused` is set as undici writes the request. */
export const track = (written: Written): void => {
  if (!subscribed) {
    diagnostics.subscribe("undici:client:sendHeaders", onSendHeaders)
    subscribed = true
  }
  starting = written
}
