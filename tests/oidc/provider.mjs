// A real OpenID provider for the sign-in tests: panva's oidc-provider (OpenID Certified), on
// loopback, with one confidential client and the accounts of a JSON file.
//
//   node tests/oidc/provider.mjs CONFIG.json
//
// CONFIG: {"port", "client_id", "client_secret", "redirect_uris", "post_logout_redirect_uris",
// "accounts_file"}. The accounts file ({"alice": {"email", "groups"}}) is read again at every
// sign-in, so a test changes someone's groups by rewriting it. The login and consent pages are
// the provider's own development interactions (any password): tests drive them over HTTP.
// Prints "listening <issuer>" once it answers.

import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const issuer = `http://127.0.0.1:${config.port}`;

function readAccounts() {
  return JSON.parse(readFileSync(config.accounts_file, 'utf8'));
}

const { privateKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
const signingKey = { ...privateKey.export({ format: 'jwk' }), kid: 'test-rs256', use: 'sig', alg: 'RS256' };

const provider = new Provider(issuer, {
  clients: [
    {
      client_id: config.client_id,
      client_secret: config.client_secret,
      redirect_uris: config.redirect_uris,
      post_logout_redirect_uris: config.post_logout_redirect_uris,
      response_types: ['code'],
      grant_types: ['authorization_code'],
      token_endpoint_auth_method: 'client_secret_basic',
    },
  ],
  jwks: { keys: [signingKey] },
  cookies: { keys: [randomBytes(32).toString('hex')] },
  // Kubernetes reads identity from the ID token, as providers set up for it (Dex, Keycloak) put
  // it there: the requested claims go into the ID token too, not only to userinfo.
  conformIdTokenClaims: false,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups'],
  pkce: { required: () => true },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  async findAccount(ctx, sub) {
    const account = readAccounts()[sub];
    if (!account) {
      return undefined;
    }
    return {
      accountId: sub,
      async claims() {
        return {
          sub,
          preferred_username: sub,
          email: account.email,
          email_verified: account.email_verified ?? true,
          groups: account.groups,
        };
      },
    };
  },
});

const server = provider.listen(config.port, '127.0.0.1', () => {
  process.stdout.write(`listening ${issuer}\n`);
});

for (const signal of ['SIGTERM', 'SIGINT']) {
  process.on(signal, () => server.close(() => process.exit(0)));
}
