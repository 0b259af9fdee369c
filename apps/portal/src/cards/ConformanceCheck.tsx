/**
 * "Check conformance" on a stored connection: runs the read-only bridge
 * conformance check (nothing is written to the CRM) and shows the verdict,
 * the failures first with the contract rule each proves and the hint to fix
 * it, then the warnings (passed, but the contract asks more), and every
 * check's status behind a disclosure.
 */
import { useState } from "react"
import { type Client, type PortalApi, run } from "../api.js"
import { Status } from "../ui/Status.js"

type Report = PortalApi.ConformanceReport

const statusLabel = { pass: "PASS", warn: "WARN", fail: "FAIL", skip: "SKIP" } as const
const badgeClass = { pass: "succeeded", warn: "disabled", fail: "failed", skip: "pending" } as const

const Verdict = ({ report }: { readonly report: Report }) => (
  <p className={report.passed ? "ok" : "error"} role="status" data-testid="conformance-verdict">
    {report.passed
      ? "Conformant: the bridge earns the read-only level of svc.crm.v1."
      : "Not conformant: fix the failed checks below, then check again."}
    {" "}
    <span className="hint">
      {report.counts.pass} passed · {report.counts.warn > 0 && <>{report.counts.warn} warned · </>}{report.counts.fail} failed · {report.counts.skip} skipped · contract {report.contract_version}
    </span>
  </p>
)

const Finding = ({ check }: { readonly check: Report["checks"][number] }) => (
  <li data-testid={check.status === "warn" ? "conformance-warning" : "conformance-failure"}>
    <div className="grow">
      <span className={`badge ${badgeClass[check.status]}`}>{statusLabel[check.status]}</span> <code>{check.id}</code>{" "}
      <span className="hint">({check.section})</span>
      <blockquote className="rule">{check.rule}</blockquote>
      <p>{check.detail}</p>
      <p><strong>{check.status === "warn" ? "Not a failure; to meet the contract's wording:" : "Fix:"}</strong> {check.hint}</p>
    </div>
  </li>
)

export const ConformanceCheck = (
  { client, disabled, tenantId }: { readonly client: Client; readonly disabled: boolean; readonly tenantId: string }
) => {
  const [busy, setBusy] = useState(false)
  const [report, setReport] = useState<Report | undefined>(undefined)
  const [error, setError] = useState<string | undefined>(undefined)

  const check = async () => {
    setBusy(true)
    setError(undefined)
    const result = await run(client.connections.check({ path: { tenantId } }))
    setBusy(false)
    if (result.ok) setReport(result.value)
    else {
      setReport(undefined)
      setError(result.error)
    }
  }

  const failures = report?.checks.filter((c) => c.status === "fail") ?? []
  const warnings = report?.checks.filter((c) => c.status === "warn") ?? []
  return (
    <div className="conformance" data-testid="conformance">
      <button type="button" disabled={disabled || busy} aria-busy={busy} onClick={check}>
        {busy ? "Checking…" : "Check conformance"}
      </button>
      {busy && <p className="hint" role="status">Running the read-only conformance check against tenant {tenantId}; this takes a few seconds.</p>}
      <Status error={error} />
      {report !== undefined && !busy && (
        <div className="detail">
          <Verdict report={report} />
          {failures.length > 0 && (
            <>
              <h4>Failed checks</h4>
              <ul className="list">{failures.map((c) => <Finding key={c.id} check={c} />)}</ul>
            </>
          )}
          {warnings.length > 0 && (
            <>
              <h4>Warnings (passed)</h4>
              <ul className="list">{warnings.map((c) => <Finding key={c.id} check={c} />)}</ul>
            </>
          )}
          <details>
            <summary>All {report.checks.length} checks</summary>
            <div className="scroll">
              <table>
                <thead>
                  <tr>
                    <th scope="col">Status</th>
                    <th scope="col">Check</th>
                    <th scope="col">Rule (svc.crm.v1)</th>
                  </tr>
                </thead>
                <tbody>
                  {report.checks.map((c) => (
                    <tr key={c.id} data-testid="conformance-check">
                      <td><span className={`badge ${badgeClass[c.status]}`}>{statusLabel[c.status]}</span></td>
                      <td><code>{c.id}</code></td>
                      <td>
                        <q>{c.rule}</q> <span className="hint">({c.section})</span>
                        {c.status === "skip" && (
                          <div className="hint">
                            {c.level === "writes"
                              ? "The write level creates test records, so it is not run from this page: run `crm-relay bridge check` with `--writes` on a test tenant."
                              : c.detail}
                          </div>
                        )}
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
          </details>
        </div>
      )}
    </div>
  )
}
