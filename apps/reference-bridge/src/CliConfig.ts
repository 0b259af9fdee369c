/**
 * Settings of the reference bridge's command line (`npm start`): from flags
 * (`--port 8443`, `--api-key=…`) or the environment (`PORT`, `BRIDGE_API_KEY`),
 * flags first. This is the only place the CLI reads its environment. Relative
 * paths resolve against the directory npm was run from (`INIT_CWD`), else the
 * working directory.
 */
import { Config, ConfigProvider, Data, Effect, Either } from "effect"

/** Every setting: flag name, environment name, meaning. */
export const SETTINGS = [
  { flag: "port", env: "PORT", help: "HTTPS port (default 8443; 0 picks a free one)" },
  { flag: "host", env: "HOST", help: "listen address (default 127.0.0.1)" },
  { flag: "url-host", env: "BRIDGE_URL_HOST", help: "host name in the printed URLs (default: host)" },
  { flag: "tls-names", env: "BRIDGE_TLS_NAMES", help: "extra DNS names for the certificate, comma-separated" },
  { flag: "tenant-id", env: "BRIDGE_TENANT_ID", help: "the tenant (default demo-tenant)" },
  { flag: "api-key", env: "BRIDGE_API_KEY", help: "the tenant's API key (default: generated and printed once)" },
  { flag: "oauth-client-id", env: "BRIDGE_OAUTH_CLIENT_ID", help: "OAuth client id (with the secret: enables OAuth)" },
  { flag: "oauth-client-secret", env: "BRIDGE_OAUTH_CLIENT_SECRET", help: "OAuth client secret" },
  { flag: "oauth-scope", env: "BRIDGE_OAUTH_SCOPE", help: "scopes the OAuth client may request, space-separated" },
  { flag: "oauth-expires-in", env: "BRIDGE_OAUTH_EXPIRES_IN", help: "expires_in of granted tokens in seconds (default 3600)" },
  { flag: "operations", env: "BRIDGE_OPERATIONS", help: "advertised operations, comma-separated (default: all six)" },
  { flag: "ca-file", env: "BRIDGE_CA_FILE", help: "the CA certificate to trust (default .data/reference-bridge-ca.pem); kept across restarts" },
  { flag: "ca-key-file", env: "BRIDGE_CA_KEY_FILE", help: "the CA's private key (default: beside --ca-file, .key.pem)" },
  { flag: "control-token", env: "BRIDGE_CONTROL_TOKEN", help: "enables the HTTP control endpoint with this Bearer token" },
  { flag: "database-url", env: "BRIDGE_DATABASE_URL", help: "keep records in this PostgreSQL (refbridge_* tables); default memory" }
] as const

/** A flag the CLI does not know, or one without a value. */
export class UsageError extends Data.TaggedError("UsageError")<{ readonly message: string }> {}

/** The config provider of `argv` flags, falling back to the environment. */
export const provider = (argv: ReadonlyArray<string>): Either.Either<ConfigProvider.ConfigProvider, UsageError> => {
  const values = new Map<string, string>()
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!
    const match = /^--([a-z-]+)(?:=(.*))?$/.exec(arg)
    const setting = match === null ? undefined : SETTINGS.find((s) => s.flag === match[1])
    if (match === null || setting === undefined) {
      return Either.left(new UsageError({ message: `unknown argument ${arg}; flags: ${SETTINGS.map((s) => `--${s.flag}`).join(" ")}` }))
    }
    const value = match[2] ?? argv[++i]
    if (value === undefined) return Either.left(new UsageError({ message: `--${setting.flag} needs a value` }))
    values.set(setting.env, value)
  }
  return Either.right(ConfigProvider.fromMap(values).pipe(ConfigProvider.orElse(() => ConfigProvider.fromEnv())))
}

const list = (name: string) =>
  Config.string(name).pipe(
    Config.map((s) => s.split(",").map((x) => x.trim()).filter((x) => x !== "")),
    Config.option
  )

/** The CLI's settings. */
export const CliConfig = Config.all({
  port: Config.integer("PORT").pipe(
    Config.validate({ message: "PORT must be 0–65535 (0 picks a free port)", validation: (n) => n >= 0 && n <= 65535 }),
    Config.withDefault(8443),
    Config.withDescription("HTTPS port")
  ),
  host: Config.string("HOST").pipe(Config.withDefault("127.0.0.1")),
  urlHost: Config.option(Config.string("BRIDGE_URL_HOST")),
  tlsNames: list("BRIDGE_TLS_NAMES"),
  tenantId: Config.string("BRIDGE_TENANT_ID").pipe(Config.withDefault("demo-tenant")),
  apiKey: Config.option(Config.redacted("BRIDGE_API_KEY")),
  oauthClientId: Config.option(Config.string("BRIDGE_OAUTH_CLIENT_ID")),
  oauthClientSecret: Config.option(Config.redacted("BRIDGE_OAUTH_CLIENT_SECRET")),
  oauthScope: Config.option(Config.string("BRIDGE_OAUTH_SCOPE")),
  oauthExpiresIn: Config.option(Config.integer("BRIDGE_OAUTH_EXPIRES_IN")),
  operations: list("BRIDGE_OPERATIONS"),
  caFile: Config.string("BRIDGE_CA_FILE").pipe(Config.withDefault(".data/reference-bridge-ca.pem")),
  caKeyFile: Config.option(Config.string("BRIDGE_CA_KEY_FILE")),
  // npm runs a workspace script inside the workspace folder and says where the user was in INIT_CWD:
  // relative paths mean what they meant where the command was typed.
  baseDir: Config.option(Config.string("INIT_CWD")),
  controlToken: Config.option(Config.redacted("BRIDGE_CONTROL_TOKEN")),
  databaseUrl: Config.option(Config.redacted("BRIDGE_DATABASE_URL"))
})
export type CliConfig = Config.Config.Success<typeof CliConfig>

/** The usage text. */
export const usage = (): string =>
  ["Usage: reference-bridge [--flag value]…", ...SETTINGS.map((s) => `  --${s.flag.padEnd(20)} ${s.env.padEnd(28)} ${s.help}`)].join("\n")

/** Loads the settings from `argv` and the environment. */
export const load = (argv: ReadonlyArray<string>) =>
  Either.match(provider(argv), {
    onLeft: (e) => Effect.fail(e),
    onRight: (p) => Effect.withConfigProvider(CliConfig, p)
  })
