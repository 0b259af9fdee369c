/**
 * The sample of the editor's "listen for test event": n8n has no way for a
 * webhook trigger to hand it sample data, so once the test subscription is
 * made the node reads `GET /perform-list` (the Event API's sample endpoint,
 * as the Zapier app takes its samples) and delivers the newest record of the
 * chosen kind to its own test webhook URL, as one delivery: signed with the
 * credential's signing secret when one is set (so the signature check holds
 * as for any delivery), and marked with the test subscription's id.
 *
 * n8n registers a test webhook before the node subscribes and completes the
 * registration (with the static data holding the subscription id) just
 * after, so a sample arriving in between would run without the id and its
 * subscription would never be removed. The webhook therefore answers a
 * marked delivery 503 (starting nothing, so the test webhook stays) until its
 * static data holds that id, and the node sends it again: a condition, not a
 * wait. A 404 means n8n no longer listens (stopped, or timed out): it gives up.
 * Only ever called in manual (test) mode.
 */
import type { IDataObject, IHookFunctions, IHttpRequestOptions } from 'n8n-workflow';
import { sleep } from 'n8n-workflow';
import { randomUUID } from 'node:crypto';
import { recentRecords } from '../CrmRelay/shared/EventApi';
import { signedHeaders } from '../CrmRelay/shared/Signature';
import contract from '../CrmRelay/shared/contract.json';

/** The header that marks the sample, carrying the test subscription's id. */
export const SAMPLE_HEADER = 'x-crm-relay-sample-for';

/** The webhook's answer while n8n is still completing the test webhook's registration. */
export const NOT_READY = 503;

/** How often the sample is sent again while the webhook answers NOT_READY. */
const RETRY_EVERY_MS = 250;

/** A bound against a hang: n8n's own test webhook times out after 2 minutes (at most 5 when asked). */
const GIVE_UP_AFTER_MS = 6 * 60_000;

/** Kind of a record. */
export type Kind = 'lead' | 'booking';

const WAITING = 'Listening goes on for a real event.';

/** The empty value of a delivery field the preview does not carry. */
const empty = (field: { readonly type: string; readonly list?: boolean }): unknown =>
	field.list === true ? [] : field.type === 'boolean' ? false : '';

/**
 * A preview record as the item a real delivery of `kind` makes: every field of
 * the delivery (the contract's), the record's values where it has them (id,
 * call_id, source, contact.external_id, job_type, summary, booked), `event`
 * the kind, and the fields a preview never carries (names, phones, emails,
 * the appointment) empty rather than invented.
 */
export const deliveryOf = (kind: Kind, record: IDataObject): IDataObject => {
	const item: IDataObject = {};
	for (const field of contract[kind].fields) {
		const path = field.path.split('.');
		let from: unknown = record;
		for (const key of path) from = (from as IDataObject | undefined)?.[key];
		const value = field.path === 'event' ? kind : from === undefined || from === null ? empty(field) : from;
		let into = item;
		for (const key of path.slice(0, -1)) into = (into[key] ??= {}) as IDataObject;
		into[path[path.length - 1]] = value as IDataObject[keyof IDataObject];
	}
	return item;
};

/** The newest real preview record of `kind` (a booking is a booked record), or undefined. */
export const newestOfKind = (kind: Kind, records: IDataObject[]): IDataObject | undefined =>
	records.find(
		(record) =>
			record.id !== contract.preview.syntheticId && (record.booked === true) === (kind === 'booking'),
	);

/**
 * The sample delivery's body: the newest record of `kind` in perform-list, as
 * a delivery. Awaited inside `create`, because n8n releases the expression
 * context `getCredentials` needs once `create` returns. Never throws: what it
 * could not do is logged, and the listening waits for a real event.
 */
export async function sampleBody(this: IHookFunctions, kind: Kind): Promise<Buffer | undefined> {
	try {
		const records = await recentRecords.call(this, contract.preview.limitMax);
		const record = newestOfKind(kind, records);
		if (record === undefined) {
			this.logger.info(`crm-relay's perform-list holds no ${kind} yet: no sample to show. ${WAITING}`);
			return undefined;
		}
		return Buffer.from(JSON.stringify(deliveryOf(kind, record)), 'utf8');
	} catch (error) {
		this.logger.warn(`No sample from crm-relay's perform-list: ${(error as Error).message} ${WAITING}`);
		return undefined;
	}
}

/**
 * Delivers `body` to `targetUrl` (this trigger's test webhook URL) until n8n
 * takes it; run in the background once `create` has returned, with no
 * credential or parameter read. Never throws: what it could not do is logged.
 */
export async function deliverSample(
	this: IHookFunctions,
	options: {
		readonly body: Buffer;
		readonly targetUrl: string;
		readonly subscriptionId: string;
		readonly signingSecret: string | undefined;
	},
): Promise<void> {
	const { body, targetUrl, subscriptionId, signingSecret } = options;
	const deadline = Date.now() + GIVE_UP_AFTER_MS;
	while (Date.now() < deadline) {
		const request: IHttpRequestOptions = {
			method: 'POST',
			url: targetUrl,
			body,
			headers: {
				'content-type': 'application/json',
				[SAMPLE_HEADER]: subscriptionId,
				...(signingSecret === undefined
					? {}
					: signedHeaders({
							secret: signingSecret,
							id: `msg_sample_${randomUUID()}`,
							body,
							nowSeconds: Math.floor(Date.now() / 1000),
						})),
			},
			json: false,
			returnFullResponse: true,
			ignoreHttpStatusErrors: true,
			disableFollowRedirect: true,
			timeout: 30_000,
		};
		let status: number;
		try {
			status = ((await this.helpers.httpRequest(request)) as { statusCode: number }).statusCode;
		} catch (error) {
			this.logger.warn(
				`Could not deliver the sample from perform-list to n8n's own test URL ${targetUrl}: ${(error as Error).message}. n8n must reach its own webhook URL for the sample. ${WAITING}`,
			);
			return;
		}
		if (status >= 200 && status <= 299) return;
		if (status !== NOT_READY) {
			// 404: n8n no longer listens (stopped or timed out); anything else is logged as it is.
			if (status !== 404) this.logger.warn(`n8n answered the sample with ${status}. ${WAITING}`);
			return;
		}
		await sleep(RETRY_EVERY_MS);
	}
	this.logger.warn(`n8n did not take the sample within ${GIVE_UP_AFTER_MS / 60_000} minutes. ${WAITING}`);
}
