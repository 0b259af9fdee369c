/**
 * What every CLI command prints: one sentence (or a few lines) for a person,
 * or, with `--json`, the result as one JSON line for scripts.
 */
import { Options } from "@effect/cli"
import { Console } from "effect"

/** The `--json` flag. */
export const json = Options.boolean("json").pipe(Options.withDescription("Print the result as JSON (for scripts) instead of text."))

/** Prints `value` as JSON when `asJson`, otherwise `text`. */
export const print = (asJson: boolean, value: unknown, text: string) => Console.log(asJson ? JSON.stringify(value) : text)
