/**
 * docs/extending.md teaches with the NATS destination as its worked example:
 * "the guide's worked example matches the code". The kind's file it prints
 * in full (below the header comment) is the file as it is, character for
 * character, so a change to the kind that forgets the guide fails here.
 */
import { describe, expect, it } from "@effect/vitest"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { ROOT } from "./support/Shell.js"

const read = (file: string) => Fs.readFileSync(Path.join(ROOT, file), "utf8")

/** The first TypeScript block after the line starting with `heading`. */
const blockAfter = (page: string, heading: string): string => {
  const lines = page.split("\n")
  const at = lines.findIndex((line) => line.startsWith(heading))
  const open = lines.findIndex((line, i) => i > at && line.startsWith("```ts"))
  const close = lines.findIndex((line, i) => i > open && line.startsWith("```"))
  return at < 0 || open < 0 || close < 0 ? "" : lines.slice(open + 1, close).join("\n")
}

describe("docs/extending.md", () => {
  it("the worked example matches the code: the NATS kind's file below its header comment, exactly", () => {
    const source = read("libs/events/src/NatsDestination.ts")
    const body = source.slice(source.indexOf("*/\n") + 3).trim()
    expect(blockAfter(read("docs/extending.md"), "**2. The kind**").trim()).toBe(body)
  })
})
