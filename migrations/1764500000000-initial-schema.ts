import type { MigrationInterface, QueryRunner } from 'typeorm';

/**
 * The whole initial schema. Design notes:
 * - tool_calls is the ledger; (org_id, idempotency_key) is unique so a side
 *   effect is reserved by the database, not by application locks.
 * - runtime_ledger_events is append-only: a trigger refuses DELETE, TRUNCATE and
 *   any UPDATE except the one-time seal (hash, prev_hash, chain_seq, sealed_at
 *   going from NULL to a value with every other column unchanged). Events are
 *   inserted unsealed; a single sealer (advisory lock) chains them per org in
 *   the order of `seq`, so concurrent appends never fork the chain and never
 *   serialize an org's traffic.
 * - Platform-level events (no org) use the nil UUID as org_id.
 */
export class InitialSchema1764500000000 implements MigrationInterface {
  name = 'InitialSchema1764500000000';

  async up(q: QueryRunner): Promise<void> {
    await q.query(`
      CREATE TABLE orgs (
        id uuid PRIMARY KEY,
        name text NOT NULL CHECK (length(name) BETWEEN 1 AND 200),
        created_at timestamptz NOT NULL DEFAULT now()
      );

      CREATE TABLE api_keys (
        id uuid PRIMARY KEY,
        org_id uuid REFERENCES orgs(id),
        role text NOT NULL CHECK (role IN ('agent','ops','expert','admin')),
        name text NOT NULL,
        key_hash bytea NOT NULL,
        key_prefix text NOT NULL,
        created_by uuid,
        created_at timestamptz NOT NULL DEFAULT now(),
        revoked_at timestamptz,
        last_used_at timestamptz,
        CONSTRAINT api_keys_platform_role CHECK (org_id IS NOT NULL OR role IN ('ops','admin'))
      );
      CREATE UNIQUE INDEX api_keys_hash_uq ON api_keys (key_hash);
      CREATE INDEX api_keys_org_idx ON api_keys (org_id, created_at);

      CREATE TABLE feature_flags (
        org_id uuid NOT NULL REFERENCES orgs(id),
        flag text NOT NULL,
        enabled boolean NOT NULL,
        reason text,
        updated_by uuid,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (org_id, flag)
      );

      CREATE TABLE tool_permissions (
        id uuid PRIMARY KEY,
        org_id uuid NOT NULL REFERENCES orgs(id),
        tool_name text NOT NULL,
        action text NOT NULL,
        specialist_id text,
        enabled boolean NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE UNIQUE INDEX tool_permissions_uq ON tool_permissions (org_id, tool_name, action, coalesce(specialist_id, ''));

      CREATE TABLE policies (
        org_id uuid PRIMARY KEY REFERENCES orgs(id),
        rules jsonb NOT NULL,
        version integer NOT NULL DEFAULT 1,
        updated_by uuid,
        updated_at timestamptz NOT NULL DEFAULT now()
      );

      CREATE TABLE agent_runs (
        id uuid PRIMARY KEY,
        org_id uuid NOT NULL REFERENCES orgs(id),
        specialist_id text NOT NULL,
        conversation_id text,
        status text NOT NULL CHECK (status IN ('running','waiting_approval','completed','cancelled')),
        metadata jsonb NOT NULL,
        pending_approval_count integer NOT NULL DEFAULT 0 CHECK (pending_approval_count >= 0),
        total_cost_cents bigint NOT NULL DEFAULT 0,
        created_by uuid,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX agent_runs_org_idx ON agent_runs (org_id, created_at DESC);

      CREATE TABLE tool_calls (
        id uuid PRIMARY KEY,
        org_id uuid NOT NULL REFERENCES orgs(id),
        run_id uuid NOT NULL REFERENCES agent_runs(id),
        specialist_id text NOT NULL,
        tool_name text NOT NULL,
        action text NOT NULL,
        vendor text,
        status text NOT NULL CHECK (status IN ('requested','blocked','waiting_approval','approved','running','succeeded','failed','indeterminate')),
        error_code text,
        error_text text,
        http_status integer NOT NULL DEFAULT 200,
        correlation_id text NOT NULL,
        idempotency_key text NOT NULL,
        tool_use_id text NOT NULL,
        action_digest text NOT NULL,
        input_redacted jsonb NOT NULL,
        output_redacted jsonb,
        risk_level text,
        policy_decision_id uuid,
        retry_count integer NOT NULL DEFAULT 0,
        retry_after_seconds integer,
        vendor_status integer,
        duration_ms integer,
        cost_cents integer NOT NULL DEFAULT 0,
        truncated boolean NOT NULL DEFAULT false,
        actor_key_id uuid,
        note text,
        created_at timestamptz NOT NULL DEFAULT now(),
        started_at timestamptz,
        finished_at timestamptz,
        updated_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE UNIQUE INDEX tool_calls_idem_uq ON tool_calls (org_id, idempotency_key);
      CREATE INDEX tool_calls_org_created_idx ON tool_calls (org_id, created_at DESC, id DESC);
      CREATE INDEX tool_calls_run_idx ON tool_calls (run_id, created_at DESC, id DESC);
      CREATE INDEX tool_calls_running_idx ON tool_calls (started_at) WHERE status = 'running';

      CREATE TABLE policy_decisions (
        id uuid PRIMARY KEY,
        org_id uuid NOT NULL,
        tool_call_id uuid NOT NULL,
        decision text NOT NULL,
        risk_level text NOT NULL,
        rule_id text,
        reason text NOT NULL,
        action_digest text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now()
      );
      CREATE INDEX policy_decisions_call_idx ON policy_decisions (tool_call_id);

      CREATE TABLE approval_requests (
        id uuid PRIMARY KEY,
        org_id uuid NOT NULL REFERENCES orgs(id),
        tool_call_id uuid NOT NULL UNIQUE,
        run_id uuid NOT NULL,
        kind text NOT NULL CHECK (kind IN ('expert','client')),
        status text NOT NULL CHECK (status IN ('pending','approved','rejected','expired')),
        tool_name text NOT NULL,
        action text NOT NULL,
        input_redacted jsonb NOT NULL,
        risk_level text NOT NULL,
        reason text NOT NULL,
        action_digest text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL,
        decided_by uuid,
        decided_role text,
        decided_at timestamptz,
        decision_reason text
      );
      CREATE INDEX approval_requests_org_idx ON approval_requests (org_id, status, created_at DESC, id DESC);
      CREATE INDEX approval_requests_pending_exp_idx ON approval_requests (expires_at) WHERE status = 'pending';

      CREATE TABLE integration_credentials (
        org_id uuid NOT NULL REFERENCES orgs(id),
        integration_type text NOT NULL CHECK (integration_type IN ('shopify','amazon','jumio','nango')),
        key_id text NOT NULL,
        iv bytea NOT NULL,
        ciphertext bytea NOT NULL,
        auth_tag bytea NOT NULL,
        fingerprint text NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (org_id, integration_type)
      );

      CREATE TABLE tool_call_results (
        tool_call_id uuid PRIMARY KEY,
        org_id uuid NOT NULL,
        key_id text NOT NULL,
        iv bytea NOT NULL,
        ciphertext bytea NOT NULL,
        auth_tag bytea NOT NULL,
        size_bytes integer NOT NULL,
        created_at timestamptz NOT NULL DEFAULT now(),
        expires_at timestamptz NOT NULL
      );
      CREATE INDEX tool_call_results_exp_idx ON tool_call_results (expires_at);

      CREATE TABLE runtime_ledger_events (
        seq bigserial PRIMARY KEY,
        id uuid NOT NULL UNIQUE,
        org_id uuid NOT NULL,
        type text NOT NULL,
        run_id uuid,
        tool_call_id uuid,
        actor jsonb,
        metadata jsonb NOT NULL DEFAULT '{}'::jsonb,
        created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
        chain_seq bigint,
        prev_hash text,
        hash text,
        sealed_at timestamptz
      );
      CREATE UNIQUE INDEX ledger_events_chain_uq ON runtime_ledger_events (org_id, chain_seq);
      CREATE INDEX ledger_events_unsealed_idx ON runtime_ledger_events (seq) WHERE hash IS NULL;
      CREATE INDEX ledger_events_org_created_idx ON runtime_ledger_events (org_id, created_at DESC, seq DESC);
      CREATE INDEX ledger_events_call_idx ON runtime_ledger_events (tool_call_id, seq) WHERE tool_call_id IS NOT NULL;

      CREATE FUNCTION ledger_events_guard() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'UPDATE' THEN
          IF OLD.hash IS NULL AND NEW.hash IS NOT NULL AND NEW.chain_seq IS NOT NULL
             AND NEW.seq = OLD.seq AND NEW.id = OLD.id AND NEW.org_id = OLD.org_id
             AND NEW.type = OLD.type
             AND NEW.run_id IS NOT DISTINCT FROM OLD.run_id
             AND NEW.tool_call_id IS NOT DISTINCT FROM OLD.tool_call_id
             AND NEW.actor IS NOT DISTINCT FROM OLD.actor
             AND NEW.metadata = OLD.metadata
             AND NEW.created_at = OLD.created_at THEN
            RETURN NEW; -- the one-time seal
          END IF;
        END IF;
        RAISE EXCEPTION 'runtime_ledger_events is append-only (% refused)', TG_OP
          USING ERRCODE = 'insufficient_privilege';
      END $$;
      CREATE TRIGGER ledger_events_no_update BEFORE UPDATE OR DELETE ON runtime_ledger_events
        FOR EACH ROW EXECUTE FUNCTION ledger_events_guard();
      CREATE TRIGGER ledger_events_no_truncate BEFORE TRUNCATE ON runtime_ledger_events
        FOR EACH STATEMENT EXECUTE FUNCTION ledger_events_guard();
    `);
  }

  async down(q: QueryRunner): Promise<void> {
    await q.query(`
      DROP TABLE IF EXISTS runtime_ledger_events, tool_call_results, integration_credentials, approval_requests,
        policy_decisions, tool_calls, agent_runs, policies, tool_permissions, feature_flags, api_keys, orgs CASCADE;
      DROP FUNCTION IF EXISTS ledger_events_guard();
    `);
  }
}
