-- 0049: a message template's title and body are not blank.
--
-- A title of spaces (or a body of them) was stored, and the jobs sent pushes and inbox rows that said
-- nothing. Now a text that is only spaces is refused when it is saved. A text that renders as nothing (all
-- of it in sections, `{{#never_active}}{{/never_active}}`) is refused by the jobs' check, which renders it:
-- the organization is skipped (78) and `rules --validate` names it.

CREATE OR REPLACE FUNCTION message_templates_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    problem text;
BEGIN
    problem := coalesce(CASE WHEN btrim(NEW.title, E' \t\r\n') = '' THEN 'title: is blank' END,
                        CASE WHEN btrim(NEW.body, E' \t\r\n') = '' THEN 'body: is blank' END,
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
