import { useState } from "react"

/** Copies `text` to the clipboard and says so. */
export const CopyButton = ({ text, label }: { readonly text: string; readonly label: string }) => {
  const [copied, setCopied] = useState<string | undefined>(undefined)
  const copy = () => {
    void navigator.clipboard.writeText(text).then(
      () => setCopied("Copied."),
      () => setCopied("Could not copy: select the text and copy it yourself.")
    )
  }
  return (
    <>
      <button type="button" onClick={copy}>{label}</button>
      <span role="status" className="hint">{copied}</span>
    </>
  )
}
