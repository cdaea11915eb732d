-- Reverts 0002_audit_log. Dropping the table is allowed: the append-only triggers guard rows,
-- and removing the audit trail takes this deliberate, logged migration step.
DROP TRIGGER jobs_audit_update ON jobs;
DROP TRIGGER jobs_audit_insert ON jobs;
DROP FUNCTION audit_jobs();
DROP TRIGGER submissions_audit_update ON submissions;
DROP TRIGGER submissions_audit_insert ON submissions;
DROP FUNCTION audit_submissions();
DROP TRIGGER workers_audit_update ON workers;
DROP TRIGGER workers_audit_insert ON workers;
DROP FUNCTION audit_workers();
DROP TRIGGER api_tokens_audit_update ON api_tokens;
DROP TRIGGER api_tokens_audit_insert ON api_tokens;
DROP FUNCTION audit_tokens();
DROP TRIGGER tenants_audit_insert ON tenants;
DROP FUNCTION audit_tenants();
DROP FUNCTION audit_actor();
DROP TABLE audit_log;
DROP FUNCTION audit_log_forbid_change();
