/**
 * The credential's test, run by n8n's "Test" button and on save: the base
 * URL, the key and the signing secret are checked for their form first (each
 * mistake is its own sentence, nothing is sent), then `GET /perform-list`
 * with the key says whether crm-relay accepts it. A refused key shows the
 * contract's sentence; an address that does not answer says so in one
 * sentence, rather than a bare system error code.
 *
 * A function rather than the declarative `test` request, because a
 * declarative test reports an unanswered request as its bare error code
 * (`ECONNREFUSED`) and cannot check the URL's scheme before the key is sent.
 */
import type {
	ICredentialDataDecryptedObject,
	ICredentialsDecrypted,
	ICredentialTestFunctions,
	INodeCredentialTestResult,
} from 'n8n-workflow';
import { checkBaseUrl, checkKey, checkSigningSecret } from './Connection';
import contract from './contract.json';

const fail = (message: string): INodeCredentialTestResult => ({ status: 'Error', message });

const whyUnreachable = (error: {
	code?: unknown;
	cause?: { code?: unknown };
	message?: unknown;
}): string => {
	const code = String(error.code ?? error.cause?.code ?? '');
	if (code === 'ENOTFOUND' || code === 'EAI_AGAIN') return 'its host name is not found';
	if (code === 'ECONNREFUSED') return 'the connection was refused';
	if (code === 'ETIMEDOUT' || code === 'ECONNABORTED' || code === 'ESOCKETTIMEDOUT')
		return 'it did not answer in time';
	if (code === 'ECONNRESET') return 'the connection was reset';
	if (code.includes('CERT') || code.startsWith('ERR_TLS'))
		return `its TLS certificate is not trusted (${code})`;
	return code !== '' ? code : String(error.message ?? 'no answer');
};

/** Tests `credential` (see the module comment). */
export async function crmRelayApiTest(
	this: ICredentialTestFunctions,
	credential: ICredentialsDecrypted,
): Promise<INodeCredentialTestResult> {
	const data: ICredentialDataDecryptedObject = credential.data ?? {};
	const base = checkBaseUrl(data.baseUrl);
	if (!base.ok) return fail(base.problem);
	const key = checkKey(data.apiKey);
	if (!key.ok) return fail(key.problem);
	const secret = checkSigningSecret(data.signingSecret);
	if (!secret.ok) return fail(secret.problem);

	let response: { statusCode: number; body: unknown };
	try {
		// ICredentialTestFunctions offers only this helper (no httpRequest) to a credential test function.
		// eslint-disable-next-line @n8n/community-nodes/no-deprecated-workflow-functions
		response = (await this.helpers.request({
			method: 'GET',
			uri: `${base.value}/perform-list`,
			qs: { limit: 1 },
			headers: { Authorization: `Bearer ${key.value}` },
			json: true,
			simple: false,
			resolveWithFullResponse: true,
			followRedirect: false,
			timeout: 30_000,
		})) as { statusCode: number; body: unknown };
	} catch (error) {
		return fail(
			`Could not reach the crm-relay Event API at ${base.value}: ${whyUnreachable(error as { code?: unknown })}. Check the base URL (the public Event API address, e.g. https://events.example.com) and that the server is running.`,
		);
	}
	const { statusCode, body } = response;
	if (statusCode === 401) {
		return fail(
			`crm-relay refused the integration key (401): ${contract.unauthorized} Create a new key in the account's Integrations area (it is shown once) and paste it here.`,
		);
	}
	if (statusCode === 429) {
		return fail(
			"crm-relay's rate limit was reached (60 requests per integration key per minute): test again in a minute.",
		);
	}
	if (statusCode >= 500) {
		return fail(`crm-relay could not answer just now (${statusCode}): test again in a minute.`);
	}
	if (statusCode === 200 && Array.isArray(body)) {
		return { status: 'OK', message: 'Connection tested: crm-relay accepted the integration key.' };
	}
	return fail(
		`The base URL answered GET /perform-list with ${statusCode} but not with a list of preview records: it is not the crm-relay Event API. Use the address of the Event API (its public port), not the internal API or the Integrations area.`,
	);
}
