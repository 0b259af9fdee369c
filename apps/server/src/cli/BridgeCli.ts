/**
 * `crm-relay bridge check`: the svc.crm.v1 conformance check against a bridge
 * given on the command line, or a tenant's stored connection
 * (`--account A --tenant T`). Read-only by default (safe on a production
 * tenant); `--writes` also runs the write level on a test tenant. Exit 0 when
 * the requested level passes, 1 when a check fails, 2 for a usage mistake.
 */
import { Command, Options } from "@effect/cli"
import type { Connection } from "@crm-relay/bridge"
import { Effect, Option, Redacted } from "effect"
import { refused } from "./AdminError.js"
import { SECRET_ENV, secretFrom } from "./ConnectionsCli.js"
import { json } from "./Output.js"

/** Environment twins of the second tenant's secrets. */
export const OTHER_SECRET_ENV = { apiKey: "OTHER_TENANT_API_KEY", clientSecret: "OTHER_TENANT_CLIENT_SECRET" } as const

// Loaded when the command runs: the check, the egress and (for a stored connection) the data access.
const bridgeCheck = Effect.promise(() => import("./BridgeCheck.js"))

const optionalText = (name: string, description: string) => Options.text(name).pipe(Options.optional, Options.withDescription(description))
const optionalSecret = (name: string, description: string) =>
  Options.redacted(name).pipe(Options.optional, Options.withDescription(description))

/** The credential the flags give: an API key, OAuth client credentials, or none. */
const credentialOf = (
  flags: {
    readonly apiKey: Option.Option<Redacted.Redacted<string>>
    readonly tokenUrl: Option.Option<string>
    readonly clientId: Option.Option<string>
    readonly clientSecret: Option.Option<Redacted.Redacted<string>>
    readonly scope: Option.Option<string>
  },
  env: { readonly apiKey: string; readonly clientSecret: string },
  prefix: string
) =>
  Effect.gen(function*() {
    const oauth = Option.isSome(flags.tokenUrl) || Option.isSome(flags.clientId)
    if (oauth && Option.isSome(flags.apiKey)) {
      return yield* refused(`Give either --${prefix}api-key or OAuth client credentials (--${prefix}client-id, --${prefix}client-secret), not both.`)
    }
    if (oauth) {
      const secret = yield* secretFrom(flags.clientSecret, env.clientSecret)
      if (Option.isNone(flags.tokenUrl) || Option.isNone(flags.clientId) || Option.isNone(secret)) {
        return yield* refused(`OAuth client credentials need --token-url, --${prefix}client-id and --${prefix}client-secret (or ${env.clientSecret}).`)
      }
      const auth: Connection.ConnectionAuth = {
        type: "oauth",
        tokenUrl: flags.tokenUrl.value,
        clientId: flags.clientId.value,
        clientSecret: secret.value,
        ...(Option.isSome(flags.scope) ? { scope: flags.scope.value } : {})
      }
      return Option.some(auth)
    }
    const key = yield* secretFrom(flags.apiKey, env.apiKey)
    return Option.map(key, (key): Connection.ConnectionAuth => ({ type: "api_key", key }))
  })

const check = Command.make(
  "check",
  {
    tenant: Options.text("tenant").pipe(Options.withDescription("The client tenant (tenant_id) whose credential is checked.")),
    account: optionalText(
      "account",
      "Check this account's stored connection of --tenant instead of one given by flags (nothing else is needed)."
    ),
    transport: Options.choice("transport", ["rest", "mcp"]).pipe(
      Options.optional,
      Options.withDescription("rest: HTTPS POST per operation under --url; mcp: the MCP tools at --url.")
    ),
    url: optionalText("url", "The bridge's HTTPS address: {bridge_base_url} for REST, the full {mcp_url} for MCP."),
    apiKey: optionalSecret(
      "api-key",
      `API key sent as Bearer. "-" reads it from standard input; without the flag, ${SECRET_ENV.apiKey} is used.`
    ),
    tokenUrl: optionalText("token-url", "OAuth 2.0 client credentials: the HTTPS token URL."),
    clientId: optionalText("client-id", "OAuth 2.0 client credentials: the client id."),
    clientSecret: optionalSecret(
      "client-secret",
      `OAuth 2.0 client credentials: the client secret. "-" reads it from standard input; without the flag, ${SECRET_ENV.clientSecret} is used.`
    ),
    scope: optionalText("scope", "OAuth 2.0: the scope to request, when the token endpoint needs one."),
    otherTenant: optionalText(
      "other-tenant",
      "A second tenant of the same bridge: its credential is presented with --tenant's tenant_id, which the bridge must refuse (tenant binding)."
    ),
    otherApiKey: optionalSecret(
      "other-tenant-api-key",
      `The second tenant's API key (or ${OTHER_SECRET_ENV.apiKey}).`
    ),
    otherClientId: optionalText("other-tenant-client-id", "The second tenant's OAuth client id (same --token-url)."),
    otherClientSecret: optionalSecret(
      "other-tenant-client-secret",
      `The second tenant's OAuth client secret (or ${OTHER_SECRET_ENV.clientSecret}).`
    ),
    writes: Options.boolean("writes").pipe(
      Options.withDescription(
        "Also run the write level: creates a contact, a lead and an appointment labelled as conformance tests. Only on a test tenant."
      )
    ),
    junit: optionalText("junit", "Also write the report as JUnit XML to this file (for CI)."),
    verbose: Options.boolean("verbose").pipe(Options.withDescription("Show the rule and evidence of passed checks too.")),
    json
  },
  (input) =>
    Effect.gen(function*() {
      const run = yield* bridgeCheck
      const output = { json: input.json, junit: Option.getOrUndefined(input.junit), verbose: input.verbose }
      const connectionFlags: ReadonlyArray<Option.Option<unknown>> = [input.transport, input.url, input.apiKey, input.tokenUrl, input.clientId, input.clientSecret, input.scope]
      const otherFlags: ReadonlyArray<Option.Option<unknown>> = [input.otherApiKey, input.otherClientId, input.otherClientSecret]
      if (Option.isSome(input.account)) {
        if (connectionFlags.some((flag) => Option.isSome(flag)) || Option.isSome(input.otherTenant) || otherFlags.some((flag) => Option.isSome(flag))) {
          return yield* refused(
            "With --account the stored connection is checked: leave out --transport, --url, the credential flags and --other-tenant."
          )
        }
        const report = yield* run.stored(input.account.value, input.tenant, input.writes)
        return yield* run.publish(report, output)
      }
      if (Option.isNone(input.transport) || Option.isNone(input.url)) {
        return yield* refused("Give --transport and --url (and a credential), or --account to check a stored connection.")
      }
      const auth = yield* credentialOf(input, SECRET_ENV, "")
      if (Option.isNone(auth)) {
        return yield* refused(
          `Give --api-key (or ${SECRET_ENV.apiKey}, or --api-key - to read it from standard input), ` +
            "or OAuth client credentials: --token-url, --client-id and --client-secret."
        )
      }
      let otherTenant: Parameters<typeof run.direct>[0]["otherTenant"]
      if (Option.isSome(input.otherTenant)) {
        const other = yield* credentialOf(
          { apiKey: input.otherApiKey, tokenUrl: Option.isSome(input.otherClientId) ? input.tokenUrl : Option.none(), clientId: input.otherClientId, clientSecret: input.otherClientSecret, scope: input.scope },
          OTHER_SECRET_ENV,
          "other-tenant-"
        )
        if (Option.isNone(other)) {
          return yield* refused(
            `--other-tenant needs that tenant's credential: --other-tenant-api-key (or ${OTHER_SECRET_ENV.apiKey}), ` +
              "or --other-tenant-client-id and --other-tenant-client-secret."
          )
        }
        otherTenant = { tenantId: input.otherTenant.value, auth: other.value }
      } else if (otherFlags.some((flag) => Option.isSome(flag))) {
        return yield* refused("The --other-tenant-... credential flags need --other-tenant (the second tenant's id).")
      }
      const report = yield* run.direct({
        connection: {
          accountId: "bridge-check",
          tenantId: input.tenant,
          version: 1,
          transport: { kind: input.transport.value, url: input.url.value },
          auth: auth.value
        },
        writes: input.writes,
        otherTenant
      })
      return yield* run.publish(report, output)
    })
).pipe(
  Command.withDescription(
    "Check a bridge against the svc.crm.v1 contract: every rule as a PASS/WARN/FAIL/SKIP check with evidence and a hint, and the level " +
      "the bridge earns. Read-only by default (writes nothing: safe on a production tenant); --writes also checks the write path " +
      "on a test tenant. A WARN passes. Exit 0 when the requested level passes, 1 when a check fails, 2 for a usage mistake."
  )
)

/** `crm-relay bridge`. */
export const command = Command.make("bridge").pipe(
  Command.withDescription("Tools for the customer's CRM bridge."),
  Command.withSubcommands([check])
)
