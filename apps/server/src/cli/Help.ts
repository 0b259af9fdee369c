/**
 * The help of `crm-relay`, rendered from the commands' own descriptors:
 * the built-in renderer of @effect/cli colours when piped, prints usage
 * lines without the command path, adds filler under every option and pads
 * the command list to its longest description. This one prints, for
 * `crm-relay <command...> --help` and `crm-relay help <command...>` alike,
 * the full command path, each option with its own sentence, and the
 * commands wrapped to the terminal (80 columns when not a terminal); bold
 * headings only on a terminal without NO_COLOR.
 */
import type { Command } from "@effect/cli"
import type * as HelpDoc from "@effect/cli/HelpDoc"
import type * as Span from "@effect/cli/HelpDoc/Span"
import { Option, Predicate } from "effect"

/** One option of a command, as its help shows it. */
export interface Flag {
  readonly names: ReadonlyArray<string>
  /** What the value looks like (`<text>`, `live|demo|sandbox`), none for a switch. */
  readonly value: string | undefined
  readonly optional: boolean
  readonly repeated: boolean
  readonly fallback: string | undefined
  readonly description: string
}

/** A command and what is under it. */
export interface Node {
  readonly name: string
  readonly description: string
  readonly flags: ReadonlyArray<Flag>
  readonly children: ReadonlyArray<Node>
}

// The descriptors are @effect/cli's data (tagged records); they are read field by field.
const field = (value: unknown, key: string): unknown => (Predicate.hasProperty(value, key) ? value[key] : undefined)
const tag = (value: unknown): unknown => field(value, "_tag")
const text = (value: unknown): string => (typeof value === "string" ? value : "")

const spanText = (span: Span.Span): string => {
  switch (span._tag) {
    case "Text":
      return span.value
    case "URI":
      return span.value
    case "Sequence":
      return spanText(span.left) + spanText(span.right)
    default:
      return spanText(span.value)
  }
}

const isDoc = (value: unknown): value is HelpDoc.HelpDoc =>
  ["Empty", "Header", "Paragraph", "DescriptionList", "Enumeration", "Sequence"].includes(text(tag(value)))

/** The sentences of a help document, as one paragraph. */
const docText = (doc: unknown): string => {
  if (!isDoc(doc)) return ""
  switch (doc._tag) {
    case "Empty":
      return ""
    case "Header":
    case "Paragraph":
      return spanText(doc.value)
    case "Sequence":
      return [docText(doc.left), docText(doc.right)].filter((s) => s !== "").join(" ")
    case "Enumeration":
      return doc.elements.map(docText).join(" ")
    case "DescriptionList":
      return doc.definitions.map(([span, d]) => `${spanText(span)}: ${docText(d)}`).join(" ")
  }
}

const valueOf = (primitive: unknown): string | undefined => {
  switch (tag(primitive)) {
    case "Bool":
      return undefined
    case "Choice": {
      const alternatives = field(primitive, "alternatives")
      return Array.isArray(alternatives) ? alternatives.map((a: unknown) => (Array.isArray(a) ? text(a[0]) : "")).join("|") : "<choice>"
    }
    case "Integer":
      return "<integer>"
    case "Float":
      return "<number>"
    case "DateTime":
      return "<date>"
    case "Path":
      return "<path>"
    case "Redacted":
    case "Secret":
      return "<secret>"
    default:
      return "<text>"
  }
}

const shown = (fallback: unknown): string | undefined =>
  Option.isOption(fallback) || fallback === false || fallback === undefined || fallback === null
    ? undefined
    : String(fallback)

/** The options of an @effect/cli `Options` value. */
const flagsOf = (options: unknown): ReadonlyArray<Flag> => {
  switch (tag(options)) {
    case "Single": {
      const aliases = field(options, "aliases")
      const value = valueOf(field(options, "primitiveType"))
      return [{
        names: [
          ...(Array.isArray(aliases) ? aliases.map((a: unknown) => (text(a).length === 1 ? `-${text(a)}` : `--${text(a)}`)) : []),
          text(field(options, "fullName"))
        ],
        value,
        // A switch is off when absent.
        optional: value === undefined,
        repeated: false,
        fallback: undefined,
        description: docText(field(options, "description"))
      }]
    }
    case "Map":
      return flagsOf(field(options, "options"))
    case "Both":
      return [...flagsOf(field(options, "left")), ...flagsOf(field(options, "right"))]
    case "OrElse":
      return [...flagsOf(field(options, "left")), ...flagsOf(field(options, "right"))].map((f) => ({ ...f, optional: true }))
    case "WithDefault": {
      const fallback = shown(field(options, "fallback"))
      return flagsOf(field(options, "options")).map((f) => ({ ...f, optional: true, fallback }))
    }
    case "WithFallback":
      return flagsOf(field(options, "options")).map((f) => ({ ...f, optional: true }))
    case "Variadic": {
      const min = field(options, "min")
      const required = Option.isOption(min) && Option.isSome(min) && Number(min.value) > 0
      return flagsOf(field(options, "argumentOption")).map((f) => ({ ...f, optional: !required, repeated: true }))
    }
    case "KeyValueMap":
      return flagsOf(field(options, "argumentOption")).map((f) => ({ ...f, repeated: true }))
    default:
      return []
  }
}

/** The positional arguments of an @effect/cli `Args` value, shown as options named in capitals (`FILE`). */
const argsOf = (args: unknown): ReadonlyArray<Flag> => {
  switch (tag(args)) {
    case "Single":
      return [{
        names: [text(field(args, "name")).toUpperCase()],
        value: undefined,
        optional: false,
        repeated: false,
        fallback: undefined,
        description: docText(field(args, "description"))
      }]
    case "Map":
      return argsOf(field(args, "args"))
    case "Both":
      return [...argsOf(field(args, "left")), ...argsOf(field(args, "right"))]
    default:
      return []
  }
}

const nodeOf = (descriptor: unknown): Node => {
  switch (tag(descriptor)) {
    case "Map":
      return nodeOf(field(descriptor, "command"))
    case "Subcommands": {
      const parent = nodeOf(field(descriptor, "parent"))
      const children = field(descriptor, "children")
      return { ...parent, children: Array.isArray(children) ? children.map(nodeOf) : [] }
    }
    default:
      return {
        name: text(field(descriptor, "name")),
        description: docText(field(descriptor, "description")),
        flags: [...argsOf(field(descriptor, "args")), ...flagsOf(field(descriptor, "options"))],
        children: []
      }
  }
}

/** The command tree of `command`. */
export const tree = <Name extends string, R, E, A>(command: Command.Command<Name, R, E, A>): Node =>
  nodeOf(command.descriptor)

/** Every command under `node` with its path (`accounts create`), depth first. */
export const commands = (node: Node, path: ReadonlyArray<string> = []): ReadonlyArray<{ readonly path: ReadonlyArray<string>; readonly node: Node }> =>
  node.children.flatMap((child) => {
    const here = [...path, child.name]
    return [{ path: here, node: child }, ...commands(child, here)]
  })

/**
 * What the arguments ask help for: the command path of `help <command...>`,
 * or of `<command...> --help` (the words before the first option), none
 * when they do not ask for help.
 */
export const requested = (args: ReadonlyArray<string>): Option.Option<ReadonlyArray<string>> => {
  if (args[0] === "help") return Option.some(args.slice(1))
  if (!args.some((a) => a === "--help" || a === "-h")) return Option.none()
  const firstOption = args.findIndex((a) => a.startsWith("-"))
  return Option.some(args.slice(0, firstOption))
}

/** The node at `path` under `root`, none if a word names no command. */
export const find = (root: Node, path: ReadonlyArray<string>): Option.Option<Node> =>
  path.reduce<Option.Option<Node>>(
    (found, word) => Option.flatMap(found, (node) => Option.fromNullable(node.children.find((c) => c.name === word))),
    Option.some(root)
  )

/** What the arguments ask of the CLI, as far as help is concerned. */
export type Request =
  /** Help on the command at `path` (asked for, or a group named without one of its commands). */
  | { readonly _tag: "Help"; readonly path: ReadonlyArray<string> }
  /** `word` names no command under `path`. */
  | { readonly _tag: "Unknown"; readonly path: ReadonlyArray<string>; readonly word: string }
  /** A command to run. */
  | { readonly _tag: "Run" }

/** Whether `args` ask for help, name a command that does not exist, or run one. */
export const resolve = (root: Node, args: ReadonlyArray<string>): Request => {
  const asked = requested(args)
  const firstOption = args.findIndex((a) => a.startsWith("-"))
  const words = Option.getOrElse(asked, () => (firstOption < 0 ? args : args.slice(0, firstOption)))
  let node = root
  for (const [index, word] of words.entries()) {
    const child = node.children.find((c) => c.name === word)
    // Words after a command without subcommands are its own (for it to refuse).
    if (child === undefined) {
      return node.children.length > 0 || Option.isSome(asked)
        ? { _tag: "Unknown", path: words.slice(0, index), word }
        : { _tag: "Run" }
    }
    node = child
  }
  if (Option.isSome(asked)) return { _tag: "Help", path: asked.value }
  return words.length > 0 && node.children.length > 0 ? { _tag: "Help", path: words } : { _tag: "Run" }
}

/** The sentence for a word that names no command under `path`. */
export const unknown = (root: Node, path: ReadonlyArray<string>, word: string): string => {
  const parent = [root.name, ...path].join(" ")
  const under = Option.match(find(root, path), { onNone: () => [], onSome: (node) => node.children.map((c) => c.name) })
  const help = `${root.name} help${path.length === 0 ? "" : ` ${path.join(" ")}`}`
  return under.length === 0
    ? `There is no command \`${parent} ${word}\`: \`${parent}\` has no commands under it. Run \`${help}\` for its options.`
    : `There is no command \`${parent} ${word}\`; the commands of \`${parent}\` are ${under.join(", ")}. ` +
      `Run \`${help}\` for what each does.`
}

/** How the help is drawn: width in columns, and whether headings may be bold. */
export interface Style {
  readonly width: number
  readonly color: boolean
}

/** The style for `output` (standard output by default): a terminal's width and bold unless NO_COLOR, or 80 columns plain. */
export const style = (
  output: { readonly isTTY?: boolean; readonly columns?: number } = process.stdout,
  env: Record<string, string | undefined> = process.env
): Style => {
  const tty = output.isTTY === true
  const noColor = (env["NO_COLOR"] ?? "") !== ""
  return {
    width: tty && typeof output.columns === "number" && output.columns > 0 ? output.columns : 80,
    color: tty && !noColor
  }
}

/** `paragraph` wrapped to `width` columns, each line after `indent` spaces. */
export const wrap = (paragraph: string, width: number, indent: number): ReadonlyArray<string> =>
  wrapWords(paragraph.split(/\s+/), width, indent)

/** `words` (kept whole) wrapped to `width` columns, each line after `indent` spaces. */
const wrapWords = (words: ReadonlyArray<string>, width: number, indent: number): ReadonlyArray<string> => {
  const room = Math.max(20, width - indent)
  const lines: Array<string> = []
  let line = ""
  for (const word of words.filter((w) => w !== "")) {
    if (line !== "" && line.length + 1 + word.length > room) {
      lines.push(line)
      line = word
    } else {
      line = line === "" ? word : `${line} ${word}`
    }
  }
  if (line !== "") lines.push(line)
  return lines.map((l) => " ".repeat(indent) + l)
}

/** The first sentence of `text`: the list of commands stays compact, each command's help has the rest. */
export const firstSentence = (text: string): string => /^.*?[.!?](?=\s+[A-Z`]|$)/s.exec(text)?.[0] ?? text

const flagUsage = (flag: Flag): string => {
  const name = flag.names[flag.names.length - 1] ?? ""
  const base = flag.value === undefined ? name : `${name} ${flag.value}`
  const repeated = flag.repeated ? `${base}...` : base
  return flag.optional ? `[${repeated}]` : repeated
}

const HELP_FLAG: Flag = {
  names: ["-h", "--help"],
  value: undefined,
  optional: true,
  repeated: false,
  fallback: undefined,
  description: "Print this help (the same as `crm-relay help <command...>`)."
}

const VERSION_FLAG: Flag = { ...HELP_FLAG, names: ["--version"], description: "Print the version of crm-relay." }

/** The help text of the command at `path` under `root` (which must exist: see `find`). */
export const render = (root: Node, path: ReadonlyArray<string>, node: Node, style: Style): string => {
  const heading = (title: string) => (style.color ? `\u001b[1m${title}\u001b[0m` : title)
  const fullPath = [root.name, ...path].join(" ")
  const out: Array<string> = []
  out.push(...wrap(`${fullPath}: ${node.description}`, style.width, 0), "")

  // An option's usage (`[--limit <integer>]`) is never split across lines.
  const usage = node.children.length > 0 && node.flags.length === 0
    ? [fullPath, "<command>", "[options]"]
    : [fullPath, ...node.flags.map(flagUsage)]
  out.push(heading("Usage"), ...wrapWords(usage, style.width, 2), "")

  const flags = [...node.flags, HELP_FLAG, ...(path.length === 0 ? [VERSION_FLAG] : [])]
  out.push(heading("Options"))
  for (const flag of flags) {
    const names = flag.names.join(", ") + (flag.value === undefined ? "" : ` ${flag.value}`)
    const notes = [
      ...(flag.repeated ? ["repeatable"] : []),
      ...(flag.optional || flag.value === undefined ? [] : ["required"]),
      ...(flag.fallback === undefined ? [] : [`default: ${flag.fallback}`])
    ]
    out.push(...wrap(notes.length === 0 ? names : `${names} (${notes.join("; ")})`, style.width, 2))
    out.push(...wrap(flag.description, style.width, 6))
  }

  const below = path.length === 0 ? commands(node).filter((c) => c.node.children.length === 0) : commands(node, path)
  if (below.length > 0) {
    out.push("", heading("Commands"))
    const names = below.map((c) => c.path.join(" "))
    const column = Math.max(...names.map((n) => n.length)) + 4
    // Side by side when there is room for the descriptions, one under the other otherwise; first sentences only.
    const sideBySide = style.width - column >= 40
    below.forEach((c, i) => {
      const name = names[i] ?? ""
      const description = wrap(firstSentence(c.node.description), style.width, sideBySide ? column : 6)
      if (sideBySide) {
        const [first = "", ...rest] = description
        out.push(`  ${name}${" ".repeat(column - 2 - name.length)}${first.trimStart()}`, ...rest)
      } else {
        out.push(`  ${name}`, ...description)
      }
    })
    out.push("", ...wrap(`Run \`${root.name} help <command...>\` (or \`${root.name} <command...> --help\`) for a command's options.`, style.width, 0))
  }
  return out.join("\n")
}
