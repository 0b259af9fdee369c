/**
 * Standard Webhooks verification (https://www.standardwebhooks.com), as
 * crm-relay signs every delivery: `webhook-signature` holds one or more
 * space-separated `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed by
 * the base64-decoded part of the account's `whsec_` secret (two during a
 * secret rotation's overlap); `webhook-timestamp` is unix seconds and must be
 * within the tolerance of now, so a captured delivery cannot be replayed later.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far a delivery's timestamp may be from now, as the Standard Webhooks libraries allow. */
export const TOLERANCE_SECONDS = 5 * 60;

/** The HMAC-SHA256 of `id.timestamp.body` under a `whsec_` secret: the value a `v1,` signature carries. */
const hmac = (secret: string, id: string, timestamp: string, body: Buffer): Buffer =>
	createHmac('sha256', Buffer.from(secret.slice('whsec_'.length), 'base64'))
		.update(Buffer.concat([Buffer.from(`${id}.${timestamp}.`, 'utf8'), body]))
		.digest();

/** The three Standard Webhooks headers of `body`, signed now with `secret`, as crm-relay sends them. */
export const signedHeaders = (options: {
	readonly secret: string;
	readonly id: string;
	readonly body: Buffer;
	readonly nowSeconds: number;
}): Record<string, string> => {
	const timestamp = String(options.nowSeconds);
	return {
		'webhook-id': options.id,
		'webhook-timestamp': timestamp,
		'webhook-signature': `v1,${hmac(options.secret, options.id, timestamp, options.body).toString('base64')}`,
	};
};

/** Why a delivery does not verify, or undefined when it does. */
export const signatureProblem = (options: {
	readonly secret: string;
	readonly headers: Readonly<Record<string, string | string[] | undefined>>;
	readonly body: Buffer;
	readonly nowSeconds: number;
}): string | undefined => {
	const header = (name: string) => {
		const value = options.headers[name];
		return Array.isArray(value) ? value.join(' ') : value;
	};
	const id = header('webhook-id');
	const timestamp = header('webhook-timestamp');
	const signatures = header('webhook-signature');
	if (id === undefined || timestamp === undefined || signatures === undefined) {
		return 'The delivery carries no webhook-id, webhook-timestamp and webhook-signature headers.';
	}
	const seconds = /^\d{1,12}$/.test(timestamp) ? Number(timestamp) : NaN;
	if (!Number.isFinite(seconds))
		return "The delivery's webhook-timestamp is not a number of seconds.";
	if (Math.abs(options.nowSeconds - seconds) > TOLERANCE_SECONDS) {
		return `The delivery's webhook-timestamp is more than ${TOLERANCE_SECONDS} s from now: it is stale or replayed (or this machine's clock is off).`;
	}
	const expected = hmac(options.secret, id, timestamp, options.body);
	for (const candidate of signatures.split(' ')) {
		const [version, value] = candidate.split(',', 2);
		if (version !== 'v1' || value === undefined) continue;
		const given = Buffer.from(value, 'base64');
		if (given.length === expected.length && timingSafeEqual(given, expected)) return undefined;
	}
	return "The delivery's webhook-signature does not match the signing secret.";
};
