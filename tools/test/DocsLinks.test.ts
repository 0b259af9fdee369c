/**
 * The README is the front door and docs/ the house: every relative link of
 * the repository's Markdown pages leads to a file that exists, and every
 * `#anchor` to a heading of the page it names.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { anchors, links, slug } from "./support/Markdown.js"
import { ROOT } from "./support/Shell.js"

// Installed, built and local state: not the repository's own pages.
const LEFT_OUT = new Set(["node_modules", ".git", ".nx", ".data", "dist", "coverage", "test-output"])

/** The repository's Markdown files, relative to its root. */
const pages = (folder = ""): ReadonlyArray<string> =>
  Fs.readdirSync(Path.join(ROOT, folder), { withFileTypes: true }).flatMap((entry) => {
    if (LEFT_OUT.has(entry.name)) return []
    const relative = Path.join(folder, entry.name)
    if (entry.isDirectory()) return pages(relative)
    return entry.name.endsWith(".md") ? [relative] : []
  })

const read = (page: string) => Fs.readFileSync(Path.join(ROOT, page), "utf8")

/** Why `target`, linked from `page`, leads nowhere; undefined when it leads somewhere. */
const broken = (page: string, target: string): string | undefined => {
  // Another site (https:, mailto:), not this repository.
  if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith("//")) return undefined
  const hash = target.indexOf("#")
  const file = decodeURIComponent(hash === -1 ? target : target.slice(0, hash))
  const anchor = hash === -1 ? undefined : decodeURIComponent(target.slice(hash + 1))
  const resolved = file === "" ? page : Path.normalize(Path.join(Path.dirname(page), file))
  if (resolved.startsWith("..") || Path.isAbsolute(resolved)) return `${target}: outside the repository`
  if (!Fs.existsSync(Path.join(ROOT, resolved))) return `${target}: no file ${resolved}`
  if (anchor === undefined || !resolved.endsWith(".md")) return undefined
  return anchors(read(resolved)).has(anchor) ? undefined : `${target}: no heading of ${resolved} has the anchor #${anchor}`
}

describe("Markdown links", () => {
  it("the checker reads headings and links as GitHub renders them", () => {
    // GitHub's rules: lower case, punctuation but - and _ removed, spaces to hyphens, repeats numbered.
    expect(slug("The Integrations area (the account's own page)")).toBe("the-integrations-area-the-accounts-own-page")
    expect(slug("The internal API's reference")).toBe("the-internal-apis-reference")
    expect(slug("`bridge check`: exit codes — and *more*")).toBe("bridge-check-exit-codes--and-more")
    const page = "# A\n\n## Two\n\n```sh\n# not a heading, [nor](a-link.md)\n```\n\n## Two\n\nSee [here](#two-1), `[code](not-a-link.md)` and ![x](img.png).\n"
    expect([...anchors(page)]).toEqual(["a", "two", "two-1"])
    expect(links(page)).toEqual([{ line: 11, target: "#two-1" }, { line: 11, target: "img.png" }])
  })

  it("the pages checked are the README, CONTRIBUTING.md, docs/ and the packages' READMEs", () => {
    const found = pages()
    for (const page of ["README.md", "CONTRIBUTING.md", "docs/operating.md", "docs/configuration.md", "docs/development.md", "integrations/zapier/README.md"]) {
      expect(found).toContain(page)
    }
  })

  it("every relative link of README.md and docs/*.md (and every other page) resolves to a file, and every #anchor to a heading", () => {
    const problems = pages().flatMap((page) =>
      links(read(page)).flatMap(({ line, target }) => {
        const why = broken(page, target)
        return why === undefined ? [] : [`${page}:${line}: ${why}`]
      })
    )
    expect(problems).toEqual([])
  })

  it("a link to a missing file or heading is found", () => {
    expect(broken("README.md", "docs/operating.md#memory")).toBeUndefined()
    expect(broken("README.md", "docs/no-such-page.md")).toContain("no file docs/no-such-page.md")
    expect(broken("README.md", "docs/operating.md#no-such-heading")).toContain("no heading of docs/operating.md")
    expect(broken("docs/operating.md", "#memory")).toBeUndefined()
    expect(broken("docs/operating.md", "../../elsewhere.md")).toContain("outside the repository")
  })
})
