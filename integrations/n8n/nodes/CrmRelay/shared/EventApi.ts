/**
 * Requests to the crm-relay Event API from a node, and what its answers mean
 * to an n8n user: the credential is checked first (base URL, key form,
 * signing secret); the key goes as a Bearer token through the credential's
 * `authenticate`; a refused key, the rate limit, an unavailable service, an
 * unreachable address or a base URL that is not the Event API each become an
 * error with one sentence that says what to do.
 */
import type {
	IDataObject,
	IExecuteFunctions,
	IHookFunctions,
	IHttpRequestMethods,
	IWebhookFunctions,
	JsonObject,
} from 'n8n-workflow';
import { NodeApiError, NodeOperationError } from 'n8n-workflow';
import { checkBaseUrl, checkKey, checkSigningSecret } from './Connection';
import contract from './contract.json';

/** The credential type's name. */
export const CREDENTIAL = 'crmRelayApi';

/** The contexts a request is made from. */
export type RequestContext = IHookFunctions | IExecuteFunctions;

/** A checked credential. */
export interface Connection {
	readonly baseUrl: string;
	readonly signingSecret: string | undefined;
}

/** The credential, checked; an error naming what to fix otherwise. */
export async function connection(this: RequestContext | IWebhookFunctions): Promise<Connection> {
	const credentials = await this.getCredentials(CREDENTIAL);
	for (const checked of [checkBaseUrl(credentials.baseUrl), checkKey(credentials.apiKey)]) {
		if (!checked.ok) throw new NodeOperationError(this.getNode(), checked.problem);
	}
	const baseUrl = checkBaseUrl(credentials.baseUrl);
	const secret = checkSigningSecret(credentials.signingSecret);
	if (!secret.ok) throw new NodeOperationError(this.getNode(), secret.problem);
	return { baseUrl: baseUrl.ok ? baseUrl.value : '', signingSecret: secret.value };
}

/** An answer of the Event API. */
export interface Answer {
	readonly status: number;
	readonly body: unknown;
	readonly headers: IDataObject;
}

const errorSentence = (body: unknown): string | undefined =>
	typeof body === 'object' && body !== null && typeof (body as IDataObject).error === 'string'
		? ((body as IDataObject).error as string)
		: undefined;

const retryAfterSeconds = (answer: Answer): number | undefined => {
	const header = Number.parseInt(String(answer.headers['retry-after'] ?? ''), 10);
	if (Number.isFinite(header) && header >= 0) return header;
	const body = answer.body as IDataObject | undefined;
	return typeof body?.retryAfterSeconds === 'number' ? body.retryAfterSeconds : undefined;
};

// The system error codes of an unanswered request, as one clause.
const whyUnreachable = (error: JsonObject): string => {
	const cause = (error.cause ?? {}) as JsonObject;
	const code = String(error.code ?? cause.code ?? '');
	if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'its host name is not found';
	if (code === 'ECONNREFUSED') return 'the connection was refused';
	if (code === 'ETIMEDOUT' || code === 'ECONNABORTED' || code === 'ESOCKETTIMEDOUT')
		return 'it did not answer in time';
	if (code === 'ECONNRESET') return 'the connection was reset';
	if (code.startsWith('CERT_') || code.includes('CERT') || code === 'DEPTH_ZERO_SELF_SIGNED_CERT') {
		return `its TLS certificate is not trusted (${code})`;
	}
	return code !== '' ? code : String(error.message ?? 'no answer');
};

/** Requests `method path` under the credential's base URL; answers the status and body, every status included. */
export async function eventApiRequest(
	this: RequestContext,
	method: IHttpRequestMethods,
	path: string,
	options: { readonly qs?: IDataObject; readonly body?: IDataObject } = {},
): Promise<Answer> {
	const { baseUrl } = await connection.call(this);
	try {
		const response = (await this.helpers.httpRequestWithAuthentication.call(this, CREDENTIAL, {
			method,
			url: `${baseUrl}${path}`,
			qs: options.qs,
			body: options.body,
			json: true,
			returnFullResponse: true,
			ignoreHttpStatusErrors: true,
			disableFollowRedirect: true,
			timeout: 30_000,
		})) as { statusCode: number; body: unknown; headers: IDataObject };
		return { status: response.statusCode, body: response.body, headers: response.headers ?? {} };
	} catch (error) {
		// A NodeOperationError with the sentence: a NodeApiError would replace it by n8n's canned text for the error code.
		throw new NodeOperationError(
			this.getNode(),
			`Could not reach the crm-relay Event API at ${baseUrl}: ${whyUnreachable(error as JsonObject)}.`,
			{
				description:
					'Check the base URL in the credential (the public Event API address, e.g. https://events.example.com) and that the server is running.',
			},
		);
	}
}

/**
 * The body of a successful answer; for any other, an error with the sentence
 * an n8n user can act on (the Event API's own sentence added when it sent one).
 */
export function explain(
	this: RequestContext,
	method: string,
	path: string,
	answer: Answer,
): unknown {
	const { status } = answer;
	if (status >= 200 && status <= 299) return answer.body;
	const said = errorSentence(answer.body);
	const fail = (message: string, description?: string): never => {
		throw new NodeApiError(
			this.getNode(),
			(typeof answer.body === 'object' && answer.body !== null ? answer.body : {}) as JsonObject,
			{
				message,
				description: description ?? (said !== undefined ? `crm-relay said: "${said}"` : undefined),
				httpCode: String(status),
			},
		);
	};
	if (status === 401) {
		return fail(
			`crm-relay refused the integration key (401): ${contract.unauthorized}`,
			"The key is mistyped, disabled, or belongs to another crm-relay server. Create a new key in the account's Integrations area (it is shown once) and put it in this credential.",
		);
	}
	if (status === 429) {
		const wait = retryAfterSeconds(answer);
		return fail(
			`crm-relay's rate limit was reached (60 requests per integration key per minute): try again in ${wait ?? 60} s.`,
		);
	}
	if (status === 502 || status === 503 || status === 504) {
		return fail(
			`crm-relay could not be reached just now (${status}): try again in a minute.`,
			`If a subscription was being created, check the hooks card in the account's Integrations area before activating again.${said !== undefined ? ` crm-relay said: "${said}"` : ''}`,
		);
	}
	if (status === 404) {
		return fail(
			`No crm-relay Event API answers at this base URL (404 for ${method} ${path}): use the address of the Event API (its public port), not the internal API or the Integrations area.`,
		);
	}
	return fail(
		`crm-relay refused the request (${status} for ${method} ${path}).${said !== undefined ? '' : ' Check the base URL.'}`,
	);
}

/** The JSON of a successful answer that must be `what`; an error saying the base URL is not the Event API otherwise. */
export function expectShape<T>(
	context: RequestContext,
	method: string,
	path: string,
	body: unknown,
	isWhat: (data: unknown) => data is T,
	what: string,
): T {
	if (isWhat(body)) return body;
	throw new NodeOperationError(
		context.getNode(),
		`The base URL answered ${method} ${path} but not with ${what}: it is not the crm-relay Event API. Use the address of the Event API (its public port).`,
	);
}

/** A list of preview records (the contract's PreviewRecord: an object with a string `id`). */
const isPreviewList = (data: unknown): data is IDataObject[] =>
	Array.isArray(data) &&
	data.every(
		(record) =>
			typeof record === 'object' &&
			record !== null &&
			typeof (record as IDataObject).id === 'string',
	);

/** `GET /perform-list` with its `limit`: the account's recent records, newest first, or a NodeOperationError that says why not. */
export async function recentRecords(this: RequestContext, limit: number): Promise<IDataObject[]> {
	const path = '/perform-list';
	const answer = await eventApiRequest.call(this, 'GET', path, { qs: { limit } });
	return expectShape(
		this,
		'GET',
		path,
		explain.call(this, 'GET', path, answer),
		isPreviewList,
		'a list of preview records',
	);
}
