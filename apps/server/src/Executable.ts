/**
 * What the single executable (`npm run release`, see release.ts) carries:
 * the launcher (executable/Launcher.ts) puts its files and its build on a
 * global before it runs a command, so the server's code reads them without
 * importing `node:sea` (which a test or `npm start` has no use for). From
 * the source tree or the build, there is no such global: files come from
 * disk as before.
 */
import * as Carried from "@crm-relay/store/Carried"
import { VERSION } from "./config/Version.js"

/** The build the executable was released from. */
export interface Build {
  readonly version: string
  readonly commit: string
  /** The working tree had changes no commit holds. */
  readonly dirty: boolean
}

/** The files the executable carries (portal/…, pglite.wasm…), when this process is one. */
export const files = Carried.files

/** The build of the executable this process runs from, if it is one. */
export const build = (): Build | undefined => Carried.executable()?.build as Build | undefined

/** `crm-relay --version`: the version, the commit (and whether the tree was dirty) and the Node it runs on. */
export const versionLine = (): string => {
  const released = build()
  return released === undefined
    ? `${VERSION} (from source, node ${process.version})`
    : `${released.version} (commit ${released.commit}${released.dirty ? ", dirty tree" : ""}, node ${process.version})`
}
