/** Writes `nodes/CrmRelay/shared/contract.json` (delivery fields, samples, key form, preview limits) from the contract. */
import * as Fs from "node:fs"
import * as Path from "node:path"
import { nodeContract, render } from "./NodeContract.mjs"

const { contract, problems } = nodeContract()
if (problems.length > 0) {
  process.stderr.write(`Cannot map the delivery Schemas to n8n fields:\n${problems.join("\n")}\n`)
  process.exit(1)
}
const target = Path.join(import.meta.dirname, "..", "nodes", "CrmRelay", "shared", "contract.json")
Fs.writeFileSync(target, render(contract))
process.stdout.write(`Wrote ${Path.relative(process.cwd(), target)}\n`)
