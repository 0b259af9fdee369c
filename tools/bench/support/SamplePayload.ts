/** A realistic stored lead payload (the JSON text of a delivery), for benches that seed deliveries with SQL. */
export const leadPayload = JSON.stringify({
  event: "lead",
  call_id: "call",
  source: "Receptionist (phone)",
  contact: { external_id: "c-1", full_name: "Ada Lovelace", phones: ["+1 555 0100"], emails: ["ada@example.com"], address: "1 Analytical Way" },
  job_type: "Boiler repair",
  summary: "No hot water since this morning; the boiler shows error E119 and the pressure is low.",
  booked: false
})
