/**
 * The destination kinds this process can deliver to, assembled from Layers:
 * each kind's file exports a Layer of `Destination` and the app registers it
 * with `DestinationKinds.register(layer)`; `DestinationKinds.layerOf(...)`
 * builds the registry. The worker, the lifecycle and the API look a kind up
 * by name, so a fourth kind edits none of them.
 *
 * Why a registry filled by Layers rather than a list in one place: a kind's
 * Layer has its own requirements (Egress for webhooks, a broker's TLS
 * settings…) and its own scope (a broker connection pool closed at
 * shutdown); registering from inside the Layer keeps both with the kind.
 * Every register Layer needs the one `DestinationKinds` of the app, so the
 * registry is a single shared instance, filled while the app's Layers are
 * built and only read afterwards. Layers are memoized by reference, so
 * one register Layer named twice registers once; two Layers claiming one
 * kind name are a defect at build.
 */
import { Context, Effect, Layer } from "effect"
import { Destination, DestinationRefused, type DestinationService } from "./Destination.js"

/** The registry of destination kinds. */
export class DestinationKinds extends Context.Tag("@crm-relay/events/DestinationKinds")<DestinationKinds, {
  /** The registered kinds' names, in registration order. */
  readonly kinds: () => ReadonlyArray<string>
  /** The kind named `kind`; an unknown kind is refused with a sentence listing the known ones. */
  readonly get: (kind: string) => Effect.Effect<DestinationService, DestinationRefused>
  /** Adds a kind while the app's Layers are built; a kind registered twice is a defect. */
  readonly register: (destination: DestinationService) => Effect.Effect<void>
}>() {
  /** An empty registry, filled by the `register` Layers built with it. */
  static readonly layer: Layer.Layer<DestinationKinds> = Layer.sync(DestinationKinds, () => {
    const byKind = new Map<string, DestinationService>()
    const kinds = () => [...byKind.keys()]
    return DestinationKinds.of({
      kinds,
      get: (kind) => {
        const found = byKind.get(kind)
        return found !== undefined ? Effect.succeed(found) : Effect.fail(
          new DestinationRefused({
            reason: "unknown_kind",
            message: `The destination kind must be one of ${kinds().map((k) => `"${k}"`).join(", ")}.`
          })
        )
      },
      register: (destination) =>
        Effect.suspend(() => {
          if (byKind.has(destination.kind)) {
            return Effect.dieMessage(`destination kind "${destination.kind}" is registered twice`)
          }
          byKind.set(destination.kind, destination)
          return Effect.void
        })
    })
  })

  /** Registers the kind a `Destination` Layer builds (its requirements stay the caller's to provide). */
  static register<E, R>(kind: Layer.Layer<Destination, E, R>): Layer.Layer<never, E, R | DestinationKinds> {
    return Layer.effectDiscard(
      Effect.flatMap(Effect.zip(DestinationKinds, Destination), ([registry, destination]) => registry.register(destination))
    ).pipe(Layer.provide(kind))
  }

  /** A registry holding exactly the kinds of `registrations` (each a `DestinationKinds.register(...)` Layer). */
  static layerOf<E, R>(
    ...registrations: readonly [Layer.Layer<never, E, R>, ...Array<Layer.Layer<never, E, R>>]
  ): Layer.Layer<DestinationKinds, E, Exclude<R, DestinationKinds>> {
    return Layer.mergeAll(...registrations).pipe(Layer.provideMerge(DestinationKinds.layer))
  }
}
