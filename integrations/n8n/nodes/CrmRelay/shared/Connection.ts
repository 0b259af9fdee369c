/**
 * The two things a crm-relay credential holds — the Event API base URL and
 * the integration key — checked before any request, so a mistake gets a
 * sentence that says how to fix it instead of a failed request. Plain
 * functions without n8n imports: each answers the value or the sentence.
 */
import contract from './contract.json';

const KEY = new RegExp(contract.key.pattern);
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const SECRET = /^whsec_[A-Za-z0-9+/]+={0,2}$/;

/** Where a user gets a key. */
export const WHERE_KEY =
	"Create one in the account's Integrations area (integration keys card; the key is shown once) or with `crm-relay keys create --account <id>`.";

/** A checked value, or the sentence that says what to fix. */
export type Checked<A> =
	| { readonly ok: true; readonly value: A }
	| { readonly ok: false; readonly problem: string };

const ok = <A>(value: A): Checked<A> => ({ ok: true, value });
const problem = <A>(sentence: string): Checked<A> => ({ ok: false, problem: sentence });

/** Only a server on this machine may be plain http: a key sent anywhere else travels over TLS. */
export const isLoopback = (hostname: string): boolean =>
	hostname === 'localhost' ||
	hostname.endsWith('.localhost') ||
	/^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(hostname) ||
	hostname === '[::1]';

/** The base URL without a trailing slash. */
export const checkBaseUrl = (input: unknown): Checked<string> => {
	const raw = typeof input === 'string' ? input.trim() : '';
	if (raw === '') {
		return problem(
			'The Event API base URL is missing: enter the public address of your crm-relay Event API, e.g. https://events.example.com.',
		);
	}
	let url: URL;
	try {
		url = new URL(raw);
	} catch {
		return problem(
			`The Event API base URL "${raw}" is not a URL: enter it with its scheme, e.g. https://events.example.com.`,
		);
	}
	if (url.protocol !== 'https:' && !(url.protocol === 'http:' && isLoopback(url.hostname))) {
		return problem(
			`The Event API base URL must start with https:// (got ${url.protocol}//${url.host}): the integration key travels with every request, so only TLS is accepted (plain http only for a server on this machine).`,
		);
	}
	if (url.username !== '' || url.password !== '' || url.search !== '' || url.hash !== '') {
		return problem(
			'The Event API base URL must not carry a user name, password, query or fragment: enter only the address, e.g. https://events.example.com, and the key in its own field.',
		);
	}
	return ok(`${url.origin}${url.pathname.replace(/\/+$/, '')}`);
};

/** The integration key, trimmed. */
export const checkKey = (input: unknown): Checked<string> => {
	const key = typeof input === 'string' ? input.trim() : '';
	if (key === '') return problem(`The integration key is missing. ${WHERE_KEY}`);
	if (KEY.test(key)) return ok(key);
	if (/^bearer\s/i.test(key)) {
		return problem(
			'Enter the integration key alone, without "Bearer ": the node adds the Authorization header itself.',
		);
	}
	if (UUID.test(key)) {
		return problem(
			`This is the id of an integration key, not the key itself (the key starts with ${contract.key.prefix}). ${WHERE_KEY}`,
		);
	}
	return problem(
		`This is not a crm-relay integration key: a key starts with ${contract.key.prefix} followed by 64 (or, for an older key, 43) letters, digits, "-" or "_". Copy it again in full, or create a new one. ${WHERE_KEY}`,
	);
};

/** The signing secret, or undefined when none is set (deliveries are then taken unverified). */
export const checkSigningSecret = (input: unknown): Checked<string | undefined> => {
	const secret = typeof input === 'string' ? input.trim() : '';
	if (secret === '') return ok(undefined);
	if (SECRET.test(secret)) return ok(secret);
	return problem(
		"The signing secret is not a crm-relay signing secret: it starts with whsec_ followed by base64. Copy it from the account's Integrations area (signing secret card), or leave the field empty to take deliveries unverified.",
	);
};
