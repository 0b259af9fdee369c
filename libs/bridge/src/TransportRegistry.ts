/**
 * Transports by kind, so a connection names its transport (`rest`, `mcp`)
 * and the client picks the Layer without a switch statement. A new transport
 * is one new file exporting an entry, added where the app builds the registry.
 */
import { Context, Effect, Layer } from "effect"
import type { BridgeTransport } from "./BridgeTransport.js"
import type { Egress } from "./Egress.js"
import { InvalidConnection } from "./InvalidConnection.js"
import * as McpTransport from "./McpTransport.js"
import * as RestTransport from "./RestTransport.js"

/** One transport: its kind and how to build its Layer for an endpoint URL. */
export interface TransportEntry {
  readonly kind: string
  readonly layer: (url: string) => Layer.Layer<BridgeTransport, InvalidConnection, Egress>
}

/** The transports this process can speak. */
export class TransportRegistry extends Context.Tag("@crm-relay/bridge/TransportRegistry")<
  TransportRegistry,
  {
    readonly kinds: ReadonlyArray<string>
    /** The Layer of `kind` toward `url`; an unknown kind is an InvalidConnection. */
    readonly layer: (
      kind: string,
      url: string
    ) => Effect.Effect<Layer.Layer<BridgeTransport, InvalidConnection, Egress>, InvalidConnection>
  }
>() {
  /** A registry of exactly these entries; a kind registered twice is a defect. */
  static make(...entries: ReadonlyArray<TransportEntry>): Layer.Layer<TransportRegistry> {
    return Layer.effect(TransportRegistry, Effect.gen(function*() {
      const byKind = new Map<string, TransportEntry>()
      for (const entry of entries) {
        if (byKind.has(entry.kind)) return yield* Effect.dieMessage(`transport kind "${entry.kind}" is registered twice`)
        byKind.set(entry.kind, entry)
      }
      const kinds = [...byKind.keys()]
      return TransportRegistry.of({
        kinds,
        layer: (kind, url) => {
          const entry = byKind.get(kind)
          return entry === undefined
            ? Effect.fail(
              new InvalidConnection({
                field: "transport",
                message: `The transport must be one of ${kinds.map((k) => `"${k}"`).join(", ")}.`
              })
            )
            : Effect.succeed(entry.layer(url))
        }
      })
    }))
  }

  /** The entries of `Default`: the two contract transports. */
  static readonly defaultEntries: ReadonlyArray<TransportEntry> = [RestTransport.entry, McpTransport.entry]

  /** The two contract transports: `rest` and `mcp`. */
  static readonly Default: Layer.Layer<TransportRegistry> = TransportRegistry.make(...TransportRegistry.defaultEntries)
}
