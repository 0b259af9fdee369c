// zapier-platform-schema ships no types; the one function the tests call.
declare module "zapier-platform-schema" {
  export const validateAppDefinition: (definition: unknown) => { readonly errors: ReadonlyArray<{ readonly stack: string }> }
}
