-- The identity of this deployment: one database, one deployment. Sandbox containers carry it
-- as a label, so that deployments sharing a Docker host (a developer's stack beside the test
-- suite's databases, say) never sweep away each other's containers.
CREATE TABLE deployment (
    id         uuid PRIMARY KEY,
    singleton  boolean NOT NULL DEFAULT true UNIQUE CHECK (singleton)
);
INSERT INTO deployment (id) VALUES (gen_random_uuid());
