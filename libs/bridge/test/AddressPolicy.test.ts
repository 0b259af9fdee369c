import { describe, expect, it } from "@effect/vitest"
import { Either } from "effect"
import * as AddressPolicy from "../src/AddressPolicy.js"
import { HOSTILE, PUBLIC } from "./support/egressHostile.js"

describe("AddressPolicy", () => {
  describe("Transport rule: every DNS answer must be public", () => {
    for (const row of HOSTILE) {
      it(`${row.address} is refused as ${row.range} (${row.cidr})`, () => {
        const verdict = AddressPolicy.publicOnly.check(row.address)
        expect(verdict._tag).toBe("Blocked")
        if (verdict._tag !== "Blocked") return
        expect(verdict.range.cidr).toBe(row.cidr)
        expect(verdict.range.name).toContain(row.range)
        expect(AddressPolicy.isPermitted(verdict)).toBe(false)
      })
    }

    for (const address of PUBLIC) {
      it(`${address} is public and permitted`, () => {
        const verdict = AddressPolicy.publicOnly.check(address)
        expect(verdict).toEqual({ _tag: "Public", address })
        expect(AddressPolicy.isPermitted(verdict)).toBe(true)
      })
    }

    it("text that is not an IP address is refused as invalid", () => {
      for (const text of ["", "bridge.test", "1.2.3.4.5", "::g", "256.1.1.1", "127.0.0.1/8"]) {
        const verdict = AddressPolicy.publicOnly.check(text)
        expect(verdict._tag).toBe("Invalid")
        expect(AddressPolicy.isPermitted(verdict)).toBe(false)
      }
    })

    it("the exported tables list every range the issue names", () => {
      expect(AddressPolicy.BLOCKED_IPV4.map((r) => r.cidr)).toEqual([
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
        "192.0.0.0/24", "192.0.2.0/24", "192.88.99.0/24", "192.168.0.0/16", "198.18.0.0/15",
        "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4"
      ])
      expect(AddressPolicy.BLOCKED_IPV6.map((r) => r.cidr)).toEqual([
        "::/128", "::1/128", "::/96", "64:ff9b::/96", "64:ff9b:1::/48", "100::/64", "2001::/23",
        "2001:db8::/32", "2002::/16", "3fff::/20", "fc00::/7", "fe80::/10", "fec0::/10", "ff00::/8"
      ])
    })
  })

  describe("EGRESS_ALLOW_PRIVATE lets exactly the listed CIDRs through", () => {
    const cidrs = Either.getOrThrow(AddressPolicy.parseCidrList("127.0.0.1/32, ::1/128,10.1.0.0/16"))
    const policy = AddressPolicy.make(cidrs)

    it("addresses inside a listed CIDR are allowed, naming the CIDR", () => {
      expect(policy.check("127.0.0.1")).toEqual({ _tag: "AllowedPrivate", address: "127.0.0.1", allowedBy: "127.0.0.1/32" })
      expect(policy.check("::1")).toEqual({ _tag: "AllowedPrivate", address: "::1", allowedBy: "::1/128" })
      expect(policy.check("10.1.255.255")._tag).toBe("AllowedPrivate")
      // The mapped form reaches the same IPv4 host, so the IPv4 CIDR covers it.
      expect(policy.check("::ffff:127.0.0.1")._tag).toBe("AllowedPrivate")
    })

    it("neighbours outside the listed CIDRs stay refused", () => {
      for (const address of ["127.0.0.2", "127.0.0.0", "10.2.0.1", "10.0.255.255", "::2", "169.254.169.254", "fd00:ec2::254"]) {
        expect(policy.check(address)._tag).toBe("Blocked")
      }
    })

    it("public addresses stay public", () => {
      expect(policy.check("8.8.8.8")._tag).toBe("Public")
    })
  })

  describe("parseCidrList", () => {
    it("reads CIDRs and bare addresses, ignoring blanks and spaces", () => {
      const parsed = Either.getOrThrow(AddressPolicy.parseCidrList(" 127.0.0.1/32 ,, ::1 ,10.0.0.0/8"))
      expect(parsed.map((c) => c.text)).toEqual(["127.0.0.1/32", "::1/128", "10.0.0.0/8"])
      expect(Either.getOrThrow(AddressPolicy.parseCidrList(""))).toEqual([])
    })

    it("names the entry that is not a CIDR", () => {
      expect(AddressPolicy.parseCidrList("127.0.0.1/32,10.0.0.0/33")).toEqual(
        Either.left("\"10.0.0.0/33\" is not an IP address or CIDR block")
      )
      expect(Either.isLeft(AddressPolicy.parseCidrList("localhost"))).toBe(true)
    })
  })
})
