'use strict';
const hookTrigger = require('../hookTrigger');

/** Fires at once for each booked call (a booking event is sent instead of a lead event). */
module.exports = hookTrigger({
  kind: 'booking',
  key: 'new_booking',
  noun: 'Booking',
  label: 'New Booking',
  description: 'Triggers when a call books or requests an appointment (caller and appointment details).',
});
