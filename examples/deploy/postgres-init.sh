#!/bin/sh
# Run once by the postgres image on a new data directory (docker-entrypoint-initdb.d): a role
# that may only read cpci's tables, for CPCI_DATABASE_READ_URL. Tables are made later, by the
# service's migrations (as role cpci), so SELECT is granted on them by default privileges.
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" \
  -v reader_password="$READER_PASSWORD" <<'SQL'
CREATE ROLE cpci_reader LOGIN PASSWORD :'reader_password';
ALTER ROLE cpci_reader SET default_transaction_read_only = on;
GRANT CONNECT ON DATABASE cpci TO cpci_reader;
GRANT USAGE ON SCHEMA public TO cpci_reader;
ALTER DEFAULT PRIVILEGES FOR ROLE cpci IN SCHEMA public GRANT SELECT ON TABLES TO cpci_reader;
SQL
