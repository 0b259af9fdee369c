/**
 * The app alone, in a directory outside the workspace, as Zapier's CLI builds
 * it: the app's files, `.zapierapprc`, and a package.json holding only what the
 * app runs on (zapier-platform-core) and the CLI that pushes it. In the
 * workspace the CLI cannot bundle it: its dependency tracing reads only the
 * app's own folder, and npm hoists the dependencies to the repository root.
 */
import * as Fs from "node:fs"
import * as Path from "node:path"

const APP = Path.join(import.meta.dirname, "..")
/** What the app is made of, besides its package.json. */
export const APP_FILES = ["index.js", "lib", ".zapierapprc"] as const

interface PackageJson {
  readonly version: string
  readonly description: string
  readonly main: string
  readonly dependencies: Record<string, string>
  readonly devDependencies: Record<string, string>
}

/** Writes the standalone app into `target`, which must be new or empty; answers false (writing nothing) otherwise. */
export const writeStandalone = (target: string): boolean => {
  if (Fs.existsSync(target) && Fs.readdirSync(target).length > 0) return false
  const pkg = JSON.parse(Fs.readFileSync(Path.join(APP, "package.json"), "utf8")) as PackageJson
  Fs.mkdirSync(target, { recursive: true })
  for (const entry of APP_FILES) Fs.cpSync(Path.join(APP, entry), Path.join(target, entry), { recursive: true })
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
  return true
}
