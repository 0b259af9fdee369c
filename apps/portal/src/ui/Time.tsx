/** An instant as the reader's locale writes it. */
export const localTime = (at: string): string => new Date(at).toLocaleString()

/** A time as the reader's locale shows it, with the exact instant on hover. */
export const Time = ({ at }: { readonly at: string | null }) =>
  at === null ? <span>never</span> : <time dateTime={at} title={at}>{localTime(at)}</time>

/** A date only ("set on DATE"). */
export const DateOnly = ({ at }: { readonly at: string }) => <time dateTime={at} title={at}>{new Date(at).toLocaleDateString()}</time>
