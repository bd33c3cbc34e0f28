-- What each sandbox image holds, as the schedulers that run it register it from the image
-- itself (the index its build wrote, /usr/share/texfleet/packages.json): its TeX Live year and
-- every LaTeX package and class of its TeX trees with the version the file states. The API
-- answers GET /info/packages/{name} from here, never by running TeX.
CREATE TABLE sandbox_images (
    image_id      text PRIMARY KEY,
    texlive       text NOT NULL,
    registered_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE sandbox_image_files (
    image_id text NOT NULL REFERENCES sandbox_images (image_id) ON DELETE CASCADE,
    -- `<name>.sty` or `<name>.cls`.
    file     text NOT NULL,
    version  text NOT NULL,
    PRIMARY KEY (image_id, file)
);
GRANT SELECT, INSERT ON sandbox_images, sandbox_image_files TO texfleet_scheduler;
GRANT SELECT ON sandbox_images, sandbox_image_files TO texfleet_api;
