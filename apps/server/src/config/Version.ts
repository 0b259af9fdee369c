/**
 * The crm-relay release this build is: `--version`, and every backup's manifest. Its one source is the
 * root package.json's `version` (what `npm version` bumps, and `npm run release` names the tarball
 * after); CHANGELOG.md says what each version changed, and test/Version.test.ts that a migration never
 * lands without a new one.
 */
import { version } from "../../../../package.json"

export const VERSION: string = version
