/**
 * The container image (deploy/Containerfile: the release's executable on
 * Debian), built and run with podman as an operator would: a read-only root
 * filesystem, /data a volume, the round trip with a signed delivery to a
 * loopback HTTPS receiver, a CLI command inside the running container, a
 * clean stop on SIGTERM within the grace, and a new container on the same
 * volume that finds the account, key and subscription again. An image
 * started without ADMIN_TOKEN, its internal port reachable from outside,
 * refuses to start and says which setting is missing.
 */
import { describe, expect, it } from "@effect/vitest"
import { Certificate, Eventually, WebhookReceiver } from "@crm-relay/testing"
import { Duration, Effect, Option, Schema } from "effect"
import { randomBytes } from "node:crypto"
import * as Fs from "node:fs"
import * as Path from "node:path"
import { PROCESS_TEST_TIMEOUT } from "./support/Cli.js"
import { buildImage, podman, podmanOk } from "./support/Podman.js"
import { release, RELEASE, ROOT } from "./support/Release.js"
import { roundTrip, stillThere } from "./support/RoundTrip.js"
import { tempDir } from "./support/TempDir.js"
import { request } from "./support/TestServer.js"

const ServerJson = Schema.parseJson(Schema.Struct({ adminUrl: Schema.String, publicUrl: Schema.String, startedAt: Schema.String }))

describe("the container image (deploy/Containerfile)", () => {
  it.scopedLive("runs read-only with /data a volume: round trip, CLI, SIGTERM → 0 within the grace; a new container on the volume finds it all again", () =>
    Effect.gen(function*() {
      yield* release
      const suffix = randomBytes(4).toString("hex")
      const image = yield* buildImage(ROOT, RELEASE, `localhost/crm-relay:test-${suffix}`)
      yield* Effect.addFinalizer(() => podman(["rmi", "--force", image]))
      const volume = yield* podmanOk(["volume", "create", `crm-relay-test-${suffix}`])
      yield* Effect.addFinalizer(() => podman(["volume", "rm", "--force", volume]))
      const mountpoint = yield* podmanOk(["volume", "inspect", "--format", "{{.Mountpoint}}", volume])

      // "an image started without the settings it needs (an admin token where the internal port is reachable from outside) refuses to start and says which"
      const refused = yield* podman(["run", "--rm", "--network=host", "--read-only", "-v", `${volume}:/data`, "-e", "PORT=0", "-e", "ADMIN_PORT=0", "-e", "PORTAL_PORT=0", image])
      expect(refused.code).toBe(1)
      expect(refused.stderr).toContain("ADMIN_TOKEN must be set: ADMIN_HOST is 0.0.0.0")

      // The receiver's CA, mounted read-only for NODE_EXTRA_CA_CERTS.
      const caDir = yield* tempDir("crm-relay-image-ca-")
      Fs.chmodSync(caDir, 0o755)
      const ca = yield* Certificate.generateAuthority()
      Fs.writeFileSync(Path.join(caDir, "ca.pem"), ca.cert, { mode: 0o644 })
      const receiver = yield* WebhookReceiver.startReceiver(yield* Certificate.issue(ca))
      const adminToken = randomBytes(24).toString("base64url")
      const masterKey = randomBytes(32).toString("base64")

      /** Starts a container on the volume; waits for its server.json (a new one) and /readyz. */
      const start = (name: string) =>
        Effect.gen(function*() {
          const before = Option.getOrUndefined(readServerJson())?.startedAt
          yield* podmanOk([
            "run", "--detach", "--name", name, "--network=host", "--read-only", "-v", `${volume}:/data`, "-v", `${caDir}:/ca:ro`,
            "-e", "PORT=0", "-e", "ADMIN_PORT=0", "-e", "PORTAL_PORT=0", "-e", "LOG_LEVEL=Warning",
            "-e", `ADMIN_TOKEN=${adminToken}`, "-e", `MASTER_KEY=${masterKey}`,
            "-e", "EGRESS_ALLOW_PRIVATE=127.0.0.1/32", "-e", "NODE_EXTRA_CA_CERTS=/ca/ca.pem",
            image
          ])
          yield* Effect.addFinalizer(() => podman(["rm", "--force", name]))
          yield* Eventually.eventually(Effect.sync(() => Option.exists(readServerJson(), (info) => info.startedAt !== before)), Duration.minutes(10))
          const info = Option.getOrThrow(readServerJson())
          yield* Eventually.eventually(
            Effect.map(Effect.either(request("GET", `${info.adminUrl}/readyz`)), (answer) => answer._tag === "Right" && answer.right.status === 200),
            Duration.minutes(10)
          )
          return { adminUrl: info.adminUrl, publicUrl: info.publicUrl, adminToken }
        })
      const readServerJson = () => Schema.decodeUnknownOption(ServerJson)(Fs.existsSync(Path.join(mountpoint, "server.json")) ? Fs.readFileSync(Path.join(mountpoint, "server.json"), "utf8") : "")
      /** Stops it as an orchestrator does (SIGTERM, SIGKILL after 10 s): exit code 0 means it stopped by itself within the grace. */
      const stop = (name: string) =>
        Effect.gen(function*() {
          yield* podmanOk(["stop", "--time", "10", name])
          expect(yield* podmanOk(["inspect", "--format", "{{.State.ExitCode}}", name])).toBe("0")
        })

      const first = yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* start(`crm-relay-test-${suffix}-1`)
        expect((yield* request("GET", `${server.adminUrl}/healthz`)).status).toBe(200)
        const created = yield* roundTrip(server, receiver)
        // The CLI inside the running container reaches its server (DATA_DIR and ADMIN_TOKEN are the container's).
        const listed = yield* podmanOk(["exec", `crm-relay-test-${suffix}-1`, "crm-relay", "subscriptions", "list", "--account", created.accountId, "--json"])
        expect(listed).toContain(created.subscriptionId)
        yield* stop(`crm-relay-test-${suffix}-1`)
        return created
      }))
      yield* Effect.scoped(Effect.gen(function*() {
        const server = yield* start(`crm-relay-test-${suffix}-2`)
        yield* stillThere(server, first)
        yield* stop(`crm-relay-test-${suffix}-2`)
      }))
    }), PROCESS_TEST_TIMEOUT)
})
