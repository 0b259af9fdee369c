/** A message area that screen readers announce: an error, or a quiet confirmation. */
export const Status = ({ error, ok }: { readonly error?: string | undefined; readonly ok?: string | undefined }) => (
  <>
    {error !== undefined && <p className="error" role="alert">{error}</p>}
    {ok !== undefined && <p className="ok" role="status">{ok}</p>}
  </>
)
