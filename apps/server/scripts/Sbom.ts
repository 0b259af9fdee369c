/**
 * A CycloneDX (1.5, JSON) bill of materials of what the executable carries:
 * every npm package esbuild bundled into its scripts (from the build's
 * metafile: its inputs' `node_modules/NAME` folders), with name, version,
 * license and package URL, and the Node it is built on. The workspace's own
 * libraries are the application itself.
 */
import { createHash } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"

interface Package {
  readonly name: string
  readonly version: string
  readonly license?: string | { readonly type?: string }
}

/** `node_modules/@scope/name/…` → the package's folder (the innermost, for nested copies). */
const packageFolder = (input: string): string | undefined => {
  const match = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input)
  return match?.[1]
}

const purl = (name: string, version: string): string => `pkg:npm/${name.replace(/^@/, "%40")}@${version}`

export const sbom = (options: {
  readonly root: string
  readonly version: string
  readonly commit: string
  readonly inputs: ReadonlyArray<string>
}) => {
  const folders = new Set(options.inputs.flatMap((input) => packageFolder(input) ?? []))
  const components = new Map<string, { readonly "bom-ref": string } & Record<string, unknown>>()
  for (const folder of folders) {
    const pkg = JSON.parse(Fs.readFileSync(Path.join(options.root, folder, "package.json"), "utf8")) as Package
    const license = typeof pkg.license === "string" ? pkg.license : pkg.license?.type
    const ref = purl(pkg.name, pkg.version)
    components.set(ref, {
      type: "library",
      "bom-ref": ref,
      name: pkg.name,
      version: pkg.version,
      ...(license !== undefined ? { licenses: [{ expression: license }] } : {}),
      purl: ref
    })
  }
  const node = process.version.slice(1)
  const sorted = [...components.entries()].sort(([a], [b]) => a.localeCompare(b)).map(([, component]) => component)
  const all = [
    {
      type: "platform",
      "bom-ref": `pkg:generic/node@${node}`,
      name: "node",
      version: node,
      description: "Node.js, the runtime the single executable is built from",
      licenses: [{ expression: "MIT" }],
      purl: `pkg:generic/node@${node}?download_url=https://nodejs.org/dist/v${node}/`
    },
    ...sorted
  ]
  // The same content names the same document: the serial number is derived from it, and there is no timestamp.
  const digest = createHash("sha256").update(JSON.stringify([options.version, options.commit, all])).digest("hex")
  const uuid = `${digest.slice(0, 8)}-${digest.slice(8, 12)}-5${digest.slice(13, 16)}-a${digest.slice(17, 20)}-${digest.slice(20, 32)}`
  return {
    bomFormat: "CycloneDX",
    specVersion: "1.5",
    serialNumber: `urn:uuid:${uuid}`,
    version: 1,
    metadata: {
      component: {
        type: "application",
        "bom-ref": `crm-relay@${options.version}`,
        name: "crm-relay",
        version: options.version,
        properties: [{ name: "crm-relay:commit", value: options.commit }]
      }
    },
    components: all,
    dependencies: [{ ref: `crm-relay@${options.version}`, dependsOn: all.map((component) => component["bom-ref"]) }]
  }
}
