/**
 * A benchmark's command-line options: `--name value` pairs read from
 * `process.argv`, falling back to a default when absent or malformed.
 */

const valueOf = (name: string): string | undefined => {
  const at = process.argv.indexOf(`--${name}`)
  return at === -1 ? undefined : process.argv[at + 1]
}

/** `--name N`: a whole number of at least `min`, else `fallback`. */
export const integer = (name: string, fallback: number, min = 1): number => {
  const value = Number(valueOf(name) ?? Number.NaN)
  return Number.isInteger(value) && value >= min ? value : fallback
}

/** `--name TEXT`, if given. */
export const text = (name: string): string | undefined => valueOf(name)

/** Whether the bare flag `--name` is given. */
export const flag = (name: string): boolean => process.argv.includes(`--${name}`)
