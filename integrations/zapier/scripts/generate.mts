/** Writes `lib/contract.json` (output fields, samples and key form) from the contract. */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { appContract, render } from "./AppContract.mjs"

const { contract, problems } = appContract()
if (problems.length > 0) {
  process.stderr.write(`Cannot map the delivery Schemas to Zapier fields:\n${problems.join("\n")}\n`)
  process.exit(1)
}
const target = Path.join(import.meta.dirname, "..", "lib", "contract.json")
Fs.writeFileSync(target, render(contract))
process.stdout.write(`Wrote ${Path.relative(process.cwd(), target)}\n`)
