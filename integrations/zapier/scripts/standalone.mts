/**
 * Writes the app alone into a directory outside the workspace, as Zapier's
 * CLI builds it: the app's files, `.zapierapprc`, and a package.json holding
 * only what the app runs on (zapier-platform-core) and the CLI that pushes it.
 * In the workspace the CLI cannot bundle it: its dependency tracing reads only
 * the app's own folder, and npm hoists the dependencies to the root.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

const app = Path.join(import.meta.dirname, "..")
const target = Path.resolve(process.argv[2] ?? "")
if (process.argv[2] === undefined || (Fs.existsSync(target) && Fs.readdirSync(target).length > 0)) {
  process.stderr.write("Usage: npm run standalone -w @crm-relay/zapier -- <new or empty directory>\n")
  process.exit(2)
}
const pkg = JSON.parse(Fs.readFileSync(Path.join(app, "package.json"), "utf8")) as {
  name: string
  version: string
  description: string
  main: string
  dependencies: Record<string, string>
  devDependencies: Record<string, string>
}
Fs.mkdirSync(target, { recursive: true })
for (const entry of ["index.js", "lib", ".zapierapprc"]) Fs.cpSync(Path.join(app, entry), Path.join(target, entry), { recursive: true })
const standalone = {
  name: "crm-relay-zapier",
  version: pkg.version,
  description: pkg.description,
  private: true,
  main: pkg.main,
  dependencies: pkg.dependencies,
  devDependencies: { "zapier-platform-cli": pkg.devDependencies["zapier-platform-cli"] }
}
Fs.writeFileSync(Path.join(target, "package.json"), `${JSON.stringify(standalone, null, 2)}\n`)
Fs.writeFileSync(Path.join(target, ".gitignore"), "node_modules/\nbuild/\n")
process.stdout.write(`Wrote the Zapier app to ${target}: cd there, npm install, npx zapier-platform push\n`)
