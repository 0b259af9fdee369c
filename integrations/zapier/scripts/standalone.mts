/** `npm run standalone -w @crm-relay/zapier -- <dir>`: writes the app alone into a new or empty directory. */
import * as Path from "node:path"
import { writeStandalone } from "./StandaloneApp.mjs"

const argument = process.argv[2]
if (argument === undefined || !writeStandalone(Path.resolve(argument))) {
  process.stderr.write("Usage: npm run standalone -w @crm-relay/zapier -- <new or empty directory>\n")
  process.exit(2)
}
process.stdout.write(`Wrote the Zapier app to ${Path.resolve(argument)}: cd there, npm install, npx zapier-platform push\n`)
