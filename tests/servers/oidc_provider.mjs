// A real OpenID provider on loopback for team mode's identity tests: the certified
// node-oidc-provider (npm `oidc-provider`, installed by `make npm-tools` under .tools/), configured
// the way an organisation's identity provider would be for a team gateway.
//
//   node tests/servers/oidc_provider.mjs SETTINGS.json
//
// SETTINGS (a file, 0600: it holds the signing key) is {"jwks": {"keys": [private JWK…]},
// "users": {ID: {"email": …, "groups": […]}}, "clients": [client metadata…]}. The provider
// listens on 127.0.0.1 at a free port and prints one line, {"issuer": "http://127.0.0.1:PORT"},
// once it serves. Then:
// - access tokens are JWTs (RFC 9068) for the resource the client asks for (RFC 8707 resource
//   indicators; any loopback http resource is known, so a token for *another* resource can be
//   had too), carrying `email` and `groups` of the signed-in user;
// - dynamic client registration is open (what an MCP client uses with nothing configured);
// - ID tokens carry the claims of the scopes granted (`email`, `groups`), as organisations
//   configure their provider for a web application's sign-in (the team dashboard's);
// - sign-in is headless: the login page signs in the user the authorization request names in
//   `login_hint` (an unknown one gets 400), and consent is granted for what was asked.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const toolsFolder = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../.tools/oidc-provider');
const { default: Provider } = await import(require.resolve('oidc-provider', { paths: [toolsFolder] }));

const settings = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const users = settings.users;
const TOKEN_SCOPE = 'mcp';

function isLoopbackResource(indicator) {
  try {
    const url = new URL(indicator);
    return url.protocol === 'http:' && url.hostname === '127.0.0.1';
  } catch {
    return false;
  }
}

function configuration() {
  return {
    clients: settings.clients ?? [],
    jwks: settings.jwks,
    cookies: { keys: ['mcpfleet-tests-cookie-key'] },
    scopes: ['openid', 'offline_access', 'email', 'groups', TOKEN_SCOPE],
    claims: { openid: ['sub'], email: ['email', 'email_verified'], groups: ['groups'] },
    pkce: { required: () => true },
    conformIdTokenClaims: false,
    features: {
      devInteractions: { enabled: false },
      registration: { enabled: true },
      clientCredentials: { enabled: true },
      resourceIndicators: {
        enabled: true,
        // Without a `resource`, a token is for no gateway: the tests always name one.
        defaultResource: () => undefined,
        useGrantedResource: () => true,
        getResourceServerInfo(ctx, indicator) {
          if (!isLoopbackResource(indicator)) {
            throw new Error(`unknown resource ${indicator}`);
          }
          return {
            scope: TOKEN_SCOPE,
            audience: indicator,
            accessTokenFormat: 'jwt',
            accessTokenTTL: 600,
            jwt: { sign: { alg: 'RS256' } },
          };
        },
      },
    },
    async findAccount(ctx, id) {
      if (!Object.hasOwn(users, id)) return undefined;
      return {
        accountId: id,
        async claims() {
          return { sub: id, email: users[id].email, email_verified: true, groups: users[id].groups };
        },
      };
    },
    async extraTokenClaims(ctx, token) {
      if (!token.accountId || !Object.hasOwn(users, token.accountId)) return undefined;
      const user = users[token.accountId];
      return { email: user.email, groups: user.groups };
    },
    interactions: { url: (ctx, interaction) => `/interaction/${interaction.uid}` },
    renderError(ctx, out) {
      ctx.type = 'application/json';
      ctx.body = out;
    },
  };
}

async function interactionResult(provider, details) {
  const { prompt, params } = details;
  if (prompt.name === 'login') {
    const accountId = params.login_hint;
    return Object.hasOwn(users, accountId ?? '') ? { login: { accountId } } : undefined;
  }
  if (prompt.name !== 'consent') return undefined;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: details.session.accountId, clientId: params.client_id });
  const missing = prompt.details;
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  return { consent: { grantId: await grant.save() } };
}

const server = http.createServer();
server.listen(0, '127.0.0.1', () => {
  const issuer = `http://127.0.0.1:${server.address().port}`;
  const provider = new Provider(issuer, configuration());
  // Headless sign-in: the interaction page signs in the user named by login_hint, then grants
  // whatever consent is asked for (the tests play a user who always agrees).
  provider.use(async (ctx, next) => {
    const match = /^\/interaction\/([^/]+)$/.exec(ctx.path);
    if (!match || ctx.method !== 'GET') return next();
    const details = await provider.interactionDetails(ctx.req, ctx.res);
    const result = await interactionResult(provider, details);
    if (result === undefined) {
      ctx.status = 400;
      ctx.body = `no headless sign-in for prompt ${details.prompt.name} and login_hint ${details.params.login_hint}`;
      return undefined;
    }
    const redirectTo = await provider.interactionResult(ctx.req, ctx.res, result, { mergeWithLastSubmission: true });
    ctx.status = 303;
    ctx.redirect(redirectTo);
    return undefined;
  });
  server.on('request', provider.callback());
  process.stdout.write(`${JSON.stringify({ issuer })}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
// The tests hold our stdin: when they are gone, so are we.
process.stdin.on('end', () => process.exit(0));
process.stdin.resume();
