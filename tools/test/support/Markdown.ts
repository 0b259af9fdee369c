/**
 * What a Markdown page links to and which anchors it offers, the way GitHub
 * renders it: enough to find a link that leads nowhere before a reader does.
 */

/** A link or image of a page, with the line it is on. */
export interface Link {
  readonly line: number
  readonly target: string
}

// Fenced code: nothing in it is a heading or a link.
const FENCE = /^\s*(```|~~~)/

/** The lines of `page` outside fenced code blocks, with their line numbers (1-based). */
const proseLines = (page: string): ReadonlyArray<{ readonly line: number; readonly text: string }> => {
  const lines: Array<{ line: number; text: string }> = []
  let fenced = false
  page.split("\n").forEach((text, index) => {
    if (FENCE.test(text)) fenced = !fenced
    else if (!fenced) lines.push({ line: index + 1, text })
  })
  return lines
}

// Inline code holds no link: `[a](b)` in backticks is text.
const withoutCode = (text: string) => text.replace(/(`+)[^`]*?\1/g, "code")

/** Every inline link and image target of `page` (outside code). */
export const links = (page: string): ReadonlyArray<Link> =>
  proseLines(page).flatMap(({ line, text }) =>
    [...withoutCode(text).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((match) => ({ line, target: match[1]! }))
  )

/**
 * GitHub's anchor for a heading's text (github-slugger): the rendered text
 * lower-cased, every character but letters, marks, digits, `_`, `-` and
 * spaces removed, spaces turned into hyphens.
 */
export const slug = (heading: string): string =>
  heading
    .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
    .replace(/`([^`]*)`/g, "$1")
    .replace(/<[^>]+>/g, "")
    .trim()
    .toLowerCase()
    .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
    .replace(/ /g, "-")

/** The anchors of `page`'s headings; a repeated one gets `-1`, `-2`, … as on GitHub. */
export const anchors = (page: string): ReadonlySet<string> => {
  const seen = new Map<string, number>()
  const result = new Set<string>()
  for (const { text } of proseLines(page)) {
    const heading = /^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$/.exec(text)
    if (heading === null) continue
    const base = slug(heading[1]!)
    const count = seen.get(base) ?? 0
    seen.set(base, count + 1)
    result.add(count === 0 ? base : `${base}-${count}`)
  }
  return result
}
