-- Run once by the postgres image on an empty data directory, as POSTGRES_USER (the owner that
-- `ledger migrate` runs as). Creates the ledger's group roles ahead of the first migration (which
-- skips roles that exist) and the consumer's login, a member of ledger_writer only: the consumer
-- never migrates and appends with INSERT on the ledger tables and nothing more.
-- Change the password (and LEDGER_CONSUMER_DATABASE_URL in docker-compose.yml) for anything real.
CREATE ROLE ledger_owner NOLOGIN;
CREATE ROLE ledger_writer NOLOGIN;
CREATE ROLE ledger_reader NOLOGIN;
CREATE ROLE ledger_consumer LOGIN PASSWORD 'ledger_consumer' IN ROLE ledger_writer;
