/**
 * A conformance report for people and for CI: text for a terminal (one line
 * per check; rule, evidence and hint under each failure, rule and hint under
 * each warning) and JUnit XML (one test case per check, failures and skips as
 * JUnit reads them; a warning is a passing case whose output says WARN).
 */
import type { Conformance } from "@crm-relay/contract"

const MARK: Record<Conformance.CheckStatus, string> = { pass: "PASS", warn: "WARN", fail: "FAIL", skip: "SKIP" }

const verdict = (report: Conformance.Report): string => {
  const { fail, pass, skip, warn } = report.counts
  const level = report.earned_level === "none" ? "no level" : `the ${report.earned_level} level`
  return `Verdict: ${report.passed ? "PASSED" : "FAILED"} — the bridge earns ${level} (asked: ${report.requested_level}); ` +
    `${pass} passed, ${warn === 0 ? "" : `${warn} warned (not failures), `}${fail} failed, ${skip} skipped.`
}

/** The report as terminal text. `verbose` also shows the evidence of passed checks. */
export const text = (report: Conformance.Report, options: { readonly verbose?: boolean } = {}): string => {
  const width = Math.max(...report.checks.map((c) => c.id.length))
  const lines = [
    `svc.crm.v1 conformance check of ${report.transport} ${report.url} (tenant ${report.tenant_id}, ${
      report.credential === "api_key" ? "API key" : "OAuth client credentials"
    })`,
    ""
  ]
  let level: string | undefined
  for (const check of report.checks) {
    if (check.level !== level) {
      level = check.level
      lines.push(level === "read-only" ? "Read-only level (writes nothing)" : "Write level (creates labelled test records)")
    }
    lines.push(`  ${MARK[check.status]}  ${check.id.padEnd(width)}  ${check.detail}`)
    const flagged = check.status === "fail" || check.status === "warn"
    if (flagged || (options.verbose === true && check.status === "pass")) {
      lines.push(`        rule (${check.section}): ${check.rule}`)
      for (const e of check.evidence.slice(0, 3)) {
        lines.push(`        sent: ${e.sent}`)
        lines.push(`        got:  ${e.received} (${e.duration_ms} ms)`)
      }
      if (flagged) lines.push(`        hint: ${check.hint}`)
    }
  }
  lines.push("", verdict(report))
  return lines.join("\n")
}

const escape = (s: string): string =>
  s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")
    // XML 1.0 cannot carry most control characters, even escaped.
    .replace(/[\u0000-\u0008\u000B\u000C\u000E-\u001F]/g, "")

/** The report as JUnit XML: one `testsuite` per level, one `testcase` per check. */
export const junit = (report: Conformance.Report): string => {
  const levels = [...new Set(report.checks.map((c) => c.level))]
  const suites = levels.map((level) => {
    const checks = report.checks.filter((c) => c.level === level)
    const seconds = (c: Conformance.CheckResult) => c.evidence.reduce((sum, e) => sum + e.duration_ms, 0) / 1000
    const cases = checks.map((c) => {
      const body = [
        `rule (${c.section}): ${c.rule}`,
        ...c.evidence.flatMap((e) => [`sent: ${e.sent}`, `got:  ${e.received} (${e.duration_ms} ms)`]),
        `hint: ${c.hint}`
      ].join("\n")
      const inner = c.status === "fail"
        ? `<failure message="${escape(c.detail)}" type="${escape(c.id)}">${escape(body)}</failure>`
        : c.status === "skip"
        ? `<skipped message="${escape(c.detail)}"/>`
        : c.status === "warn"
        ? `<system-out>${escape(`WARN: ${c.detail}\n${body}`)}</system-out>`
        : `<system-out>${escape(`${c.detail}\n${body}`)}</system-out>`
      return `    <testcase classname="svc.crm.v1.${level}" name="${escape(c.id)}" time="${seconds(c).toFixed(3)}">${inner}</testcase>`
    })
    const failures = checks.filter((c) => c.status === "fail").length
    const skipped = checks.filter((c) => c.status === "skip").length
    return [
      `  <testsuite name="svc.crm.v1 ${level}" tests="${checks.length}" failures="${failures}" errors="0" skipped="${skipped}" ` +
      `timestamp="${escape(report.started_at)}">`,
      ...cases,
      "  </testsuite>"
    ].join("\n")
  })
  return [
    `<?xml version="1.0" encoding="UTF-8"?>`,
    `<testsuites name="${escape(`svc.crm.v1 conformance: ${report.transport} ${report.url} (tenant ${report.tenant_id})`)}" ` +
    `tests="${report.checks.length}" failures="${report.counts.fail}" errors="0" skipped="${report.counts.skip}" ` +
    `time="${(report.duration_ms / 1000).toFixed(3)}">`,
    ...suites,
    `</testsuites>`,
    ""
  ].join("\n")
}
