-- 0049: a message template's title and body are not blank.
--
-- A title of spaces (or a body of them, of any kind of space) was stored, and the jobs sent pushes and inbox rows that said
-- nothing. Now a text that is only spaces is refused when it is saved. A text that renders as nothing (all
-- of it in sections, `{{#never_active}}{{/never_active}}`) is refused by the jobs' check, which renders it:
-- the organization is skipped (78) and `rules --validate` names it.

CREATE OR REPLACE FUNCTION message_templates_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    problem text;
    -- Spaces of every kind: a title of no-break spaces says as little.
    blank constant text := '^[\s\u00a0\u1680\u2000-\u200b\u2028\u2029\u202f\u205f\u3000\ufeff]*$';
BEGIN
    problem := coalesce(CASE WHEN NEW.title ~ blank THEN 'title: is blank' END,
                        CASE WHEN NEW.body ~ blank THEN 'body: is blank' END,
                        'title: ' || message_template_problem(NEW.scenario, NEW.title),
                        'body: ' || message_template_problem(NEW.scenario, NEW.body));
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'message template %/%: %', NEW.scenario, NEW.language, problem
            USING ERRCODE = 'check_violation',
                  HINT = 'variables: SELECT name, description FROM message_template_variables WHERE scenario = ''' || NEW.scenario || '''';
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;
