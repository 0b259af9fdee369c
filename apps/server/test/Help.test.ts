import { describe, expect, it } from "@effect/vitest"
import { Option } from "effect"
import * as Cli from "../src/cli/Cli.js"
import * as Help from "../src/cli/Help.js"

const root = Cli.commands
const every = [{ path: [] as ReadonlyArray<string>, node: root }, ...Help.commands(root)]
const plain: Help.Style = { width: 80, color: false }
const helpOf = (path: ReadonlyArray<string>, style = plain) =>
  Help.render(root, path, Option.getOrThrow(Help.find(root, path)), style)

describe("crm-relay help", () => {
  it("\"every command and option has a sentence of its own\": no command or option goes without a description, and none is the renderer's filler", () => {
    for (const { node, path } of every) {
      expect(node.description, `crm-relay ${path.join(" ")}`).toMatch(/\w.*[.)]$/)
      for (const flag of node.flags) expect(flag.description, `crm-relay ${path.join(" ")} ${flag.names.join(", ")}`).toMatch(/\w.*[.)]$/)
      const text = helpOf(path)
      for (const filler of ["A user-defined piece of text.", "A true or false value.", "This setting is optional.", "One of the following"]) {
        expect(text).not.toContain(filler)
      }
    }
    // Distinct sentences: a description copied from command to command says nothing of its own.
    const sentences = every.map(({ node }) => node.description)
    expect(new Set(sentences).size).toBe(sentences.length)
  })

  it("\"usage lines carry the full command path\", options keep their value on one line, and nothing is wider than 80 columns off a terminal", () => {
    for (const { path } of every.slice(1)) {
      const lines = helpOf(path).split("\n")
      const usage = lines[lines.indexOf("Usage") + 1]
      expect(usage).toMatch(new RegExp(`^  crm-relay ${path.join(" ")}( |$)`))
      for (const line of lines) expect(line.length, line).toBeLessThanOrEqual(80)
      expect(lines.join("\n")).not.toMatch(/\u001b/)
    }
    expect(helpOf(["accounts", "create"])).toContain("crm-relay accounts create --name <text> [--mode live|demo|sandbox] [--json]")
    expect(helpOf(["accounts", "create"])).toContain("--mode live|demo|sandbox (default: live)")
    // The root lists every command by its full path, compactly: the first sentence of each.
    expect(Help.firstSentence("Run it. Then stop.")).toBe("Run it.")
    expect(Help.firstSentence("Times (e.g. 2026-01-31T12:00:00Z). `serve` too.")).toBe("Times (e.g. 2026-01-31T12:00:00Z).")
    expect(Help.firstSentence("No stop")).toBe("No stop")
    const rootHelp = helpOf([])
    expect(rootHelp).toMatch(/^ {2}accounts create {2,}Create an account/m)
    expect(rootHelp).toMatch(/^ {2}deliveries replay {2,}\S/m)
    expect(rootHelp).toMatch(/^ {2}master-key rotate {2,}Re-encrypt every stored secret [\s\S]*? and a final count\.\n {2}pushes list/m)
    expect(rootHelp.split("\n").length).toBeLessThanOrEqual(80)
  })

  it("`pushes list --status` is optional and repeatable, and says the statuses go comma-separated", () => {
    const text = helpOf(["pushes", "list"])
    expect(text).toContain("[--status <text>...]")
    expect(text).toMatch(/--status <text> \(repeatable\)\n\s+Which jobs to list \(default: failed\)\. One or more of failed, pending,\s+succeeded, comma-separated\./)
    expect(text).not.toMatch(/--status[^\n]*required/)
  })

  it("\"no colour unless stdout is a terminal (and honour NO_COLOR)\"; the width is the terminal's, 80 when not a terminal", () => {
    expect(Help.style({ isTTY: false, columns: 200 }, {})).toEqual({ width: 80, color: false })
    expect(Help.style({}, {})).toEqual({ width: 80, color: false })
    expect(Help.style({ isTTY: true, columns: 120 }, {})).toEqual({ width: 120, color: true })
    expect(Help.style({ isTTY: true, columns: 120 }, { NO_COLOR: "1" })).toEqual({ width: 120, color: false })
    expect(helpOf([], { width: 120, color: true })).toContain("\u001b[1mCommands\u001b[0m")
    const narrow = helpOf([], { width: 50, color: false })
    for (const line of narrow.split("\n")) expect(line.length, line).toBeLessThanOrEqual(50)
  })

  it("`help <command...>` and `<command...> --help` ask for the same command", () => {
    expect(Help.requested(["help", "pushes", "list"])).toEqual(Option.some(["pushes", "list"]))
    expect(Help.requested(["pushes", "list", "--help"])).toEqual(Option.some(["pushes", "list"]))
    expect(Help.requested(["pushes", "list", "--status", "failed", "-h"])).toEqual(Option.some(["pushes", "list"]))
    expect(Help.requested(["help"])).toEqual(Option.some([]))
    expect(Help.requested(["pushes", "list"])).toEqual(Option.none())
    expect(Help.find(root, ["pushes", "nope"])).toEqual(Option.none())
  })

  it("a group named alone asks for its help; a word that names no command is refused with the commands there are; anything else runs", () => {
    expect(Help.resolve(root, ["accounts"])).toEqual({ _tag: "Help", path: ["accounts"] })
    expect(Help.resolve(root, ["accounts", "--json"])).toEqual({ _tag: "Help", path: ["accounts"] })
    expect(Help.resolve(root, ["help", "accounts", "list"])).toEqual({ _tag: "Help", path: ["accounts", "list"] })
    expect(Help.resolve(root, ["accounts", "lst"])).toEqual({ _tag: "Unknown", path: ["accounts"], word: "lst" })
    expect(Help.resolve(root, ["help", "nope"])).toEqual({ _tag: "Unknown", path: [], word: "nope" })
    expect(Help.resolve(root, ["help", "accounts", "create", "extra"])).toEqual({ _tag: "Unknown", path: ["accounts", "create"], word: "extra" })
    expect(Help.unknown(root, ["accounts", "create"], "extra")).toBe(
      "There is no command `crm-relay accounts create extra`: `crm-relay accounts create` has no commands under it. Run `crm-relay help accounts create` for its options."
    )
    expect(Help.unknown(root, ["accounts"], "lst")).toBe(
      "There is no command `crm-relay accounts lst`; the commands of `crm-relay accounts` are create, list, show. Run `crm-relay help accounts` for what each does."
    )
    for (const args of [[], ["--version"], ["serve"], ["accounts", "list", "--json"], ["--log-level", "debug", "accounts", "list"]]) {
      expect(Help.resolve(root, args)).toEqual({ _tag: "Run" })
    }
  })
})
