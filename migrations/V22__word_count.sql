-- Word counts: a job asks for one when it is submitted ("wordcount": true, part of the result
-- cache's key), and texcount's count of its sources, run in its sandbox after the compile, is
-- kept with it (null when none was asked for or texcount gave none).
ALTER TABLE jobs ADD COLUMN wordcount boolean NOT NULL DEFAULT false;
ALTER TABLE jobs ADD COLUMN word_count jsonb;
