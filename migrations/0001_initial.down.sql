-- Reverts 0001_initial: drops every table it created, dependents first.
DROP TABLE verdicts;
DROP TABLE stage_events;
DROP FUNCTION notify_stage_event();
DROP TABLE jobs;
DROP FUNCTION notify_job_queued();
DROP TABLE submissions;
DROP TABLE workers;
DROP TABLE sources;
DROP TABLE tasks;
DROP TABLE api_tokens;
DROP TABLE tenants;
