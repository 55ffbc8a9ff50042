-- 0013: message texts as data. A template per scenario and language (nb and en shipped; a third language
-- is rows here, no code), overridable per organization without a release. Templates are Mustache
-- (rendered by swift-mustache as text: values are never escaped, never parsed as template syntax, and the
-- payload builders JSON-encode them and keep the payload within the providers' limits).
--
-- A template is checked when it is saved: only the scenario's variables (message_template_variables),
-- sections closed in order, no partials, blocks, delimiter changes or pragmas, and a size limit. The jobs
-- check again with the renderer itself when they load the templates, and `rules --validate` renders every
-- template with sample values.

CREATE TABLE message_template_variables (
    scenario     text NOT NULL REFERENCES scenario_defaults (scenario),
    name         text NOT NULL CHECK (name ~ '^[a-z_]+$'),
    kind         text NOT NULL CHECK (kind IN ('text', 'number', 'flag', 'list', 'item')),
    description  text NOT NULL,
    PRIMARY KEY (scenario, name)
);
INSERT INTO message_template_variables (scenario, name, kind, description) VALUES
    ('inactivity',           'name',         'text',   'the mentor''s name'),
    ('inactivity',           'days',         'number', 'days since the last logged activity'),
    ('inactivity',           'never_active', 'flag',   'the mentor has never logged an activity'),
    ('assignment_follow_up', 'name',         'text',   'the mentor''s name'),
    ('assignment_follow_up', 'title',        'text',   'the assignment''s title'),
    ('assignment_follow_up', 'days',         'number', 'days since it was dispatched'),
    ('new_assignment',       'title',        'text',   'the assignment''s title'),
    ('new_assignment',       'coordinator',  'text',   'the name of the coordinator who dispatched it'),
    ('honorarium',           'name',         'text',   'the mentor''s name'),
    ('honorarium',           'count',        'number', 'assignments dispatched to the mentor'),
    ('milestone',            'name',         'text',   'the mentor''s name'),
    ('milestone',            'milestone',    'number', 'the number of activities reached'),
    ('impact_summary',       'name',         'text',   'the mentor''s name'),
    ('impact_summary',       'year',         'number', 'the year summarized'),
    ('availability_change',  'mentor',       'text',   'the mentor''s name'),
    ('availability_change',  'lifted',       'flag',   'the pause was lifted (else it started)'),
    ('availability_change',  'started',      'text',   'the date the pause started'),
    ('availability_change',  'from',         'text',   'the date a future pause starts (absent when it has started)'),
    ('availability_change',  'until',        'text',   'the date the pause ends (absent: until further notice)'),
    ('availability_change',  'reason',       'text',   'the reason the mentor gave (absent when none)'),
    ('overdue_digest',       'days',         'number', 'the organization''s overdue threshold in days'),
    ('overdue_digest',       'count',        'number', 'unacknowledged assignments in the coordinator''s scope'),
    ('overdue_digest',       'single',       'flag',   'exactly one'),
    ('overdue_digest',       'mentor',       'text',   'the mentor''s name (of the single one, or of each case)'),
    ('overdue_digest',       'title',        'text',   'the assignment''s title (of the single one, or of each case)'),
    ('overdue_digest',       'cases',        'list',   'the first three cases, oldest first: mentor, title, first, last'),
    ('overdue_digest',       'first',        'item',   'in cases: the first case'),
    ('overdue_digest',       'last',         'item',   'in cases: the last case named'),
    ('overdue_digest',       'more',         'number', 'cases beyond those named (absent when none)');

CREATE TABLE message_templates (
    id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    scenario         text NOT NULL REFERENCES scenario_defaults (scenario),
    language         text NOT NULL CHECK (language ~ '^[a-z]{2,3}$'),
    organization_id  uuid REFERENCES organizations (id),   -- NULL: the shipped default
    title            text NOT NULL CHECK (octet_length(title) BETWEEN 1 AND 512),
    body             text NOT NULL CHECK (octet_length(body) BETWEEN 1 AND 2048),
    updated_at       timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX message_templates_key ON message_templates
    (scenario, language, coalesce(organization_id, '00000000-0000-0000-0000-000000000000'));

-- What is wrong with one template text of `scenario`, or NULL when nothing is.
CREATE FUNCTION message_template_problem(p_scenario text, p_text text) RETURNS text LANGUAGE plpgsql STABLE AS $$
DECLARE
    tag text;
    sigil text;
    tag_name text;
    open_sections text[] := '{}';
    known text;
BEGIN
    FOR tag IN SELECT m[1] FROM regexp_matches(p_text, '\{\{(.*?)\}\}', 'g') AS m LOOP
        tag := btrim(tag);
        sigil := left(tag, 1);
        IF sigil = '!' THEN CONTINUE; END IF;
        IF sigil IN ('>', '<', '$', '=', '%') THEN
            RETURN format('{{%s}}: partials, blocks, delimiter changes and pragmas are not allowed in message templates', tag);
        END IF;
        IF sigil IN ('{', '&') THEN
            RETURN format('{{%s}}: write {{name}}: values are never escaped in message texts', tag);
        END IF;
        tag_name := CASE WHEN sigil IN ('#', '^', '/') THEN btrim(substr(tag, 2)) ELSE tag END;
        IF tag_name <> '.' AND NOT EXISTS (SELECT FROM message_template_variables v WHERE v.scenario = p_scenario AND v.name = tag_name) THEN
            SELECT coalesce(string_agg(v.name, ', ' ORDER BY v.name), 'none') INTO known
              FROM message_template_variables v WHERE v.scenario = p_scenario;
            RETURN format('{{%s}}: %s is not a variable of %s (its variables: %s)', tag, tag_name, p_scenario, known);
        END IF;
        IF sigil IN ('#', '^') THEN
            open_sections := open_sections || tag_name;
        ELSIF sigil = '/' THEN
            IF cardinality(open_sections) = 0 OR open_sections[cardinality(open_sections)] <> tag_name THEN
                RETURN format('{{/%s}} closes %s', tag_name,
                              coalesce('{{#' || open_sections[cardinality(open_sections)] || '}}', 'no section'));
            END IF;
            open_sections := open_sections[1:cardinality(open_sections) - 1];
        END IF;
    END LOOP;
    IF cardinality(open_sections) > 0 THEN
        RETURN format('{{#%s}} is not closed', open_sections[cardinality(open_sections)]);
    END IF;
    IF regexp_replace(p_text, '\{\{.*?\}\}', '', 'g') ~ '\{\{|\}\}' THEN
        RETURN 'a {{ without its }} (or a }} without its {{)';
    END IF;
    RETURN NULL;
END $$;

CREATE FUNCTION message_templates_check() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    problem text;
BEGIN
    problem := coalesce('title: ' || message_template_problem(NEW.scenario, NEW.title),
                        'body: ' || message_template_problem(NEW.scenario, NEW.body));
    IF problem IS NOT NULL THEN
        RAISE EXCEPTION 'message template %/%: %', NEW.scenario, NEW.language, problem
            USING ERRCODE = 'check_violation',
                  HINT = 'variables: SELECT name, description FROM message_template_variables WHERE scenario = ''' || NEW.scenario || '''';
    END IF;
    NEW.updated_at := now();
    RETURN NEW;
END $$;
CREATE TRIGGER message_templates_valid BEFORE INSERT OR UPDATE ON message_templates
    FOR EACH ROW EXECUTE FUNCTION message_templates_check();

INSERT INTO message_templates (scenario, language, title, body) VALUES
    ('inactivity', 'nb', $t$Har du noe å registrere?$t$,
     $t$Hei {{name}}! {{#never_active}}Du har ikke registrert noen aktiviteter ennå. Trykk her for å registrere din første.{{/never_active}}{{^never_active}}Det er {{days}} dager siden du sist registrerte en aktivitet. Trykk her for å registrere samtaler og møter, så blir statistikken riktig.{{/never_active}}$t$),
    ('inactivity', 'en', $t$Anything to log?$t$,
     $t$Hi {{name}}! {{#never_active}}You haven't logged any activities yet. Tap here to log your first one.{{/never_active}}{{^never_active}}It's been {{days}} days since you last logged an activity. Tap here to log your conversations and meetings so your statistics stay accurate.{{/never_active}}$t$),
    ('assignment_follow_up', 'nb', $t$Et oppdrag venter på deg$t$,
     $t$Hei {{name}}! Du fikk oppdraget «{{title}}» for {{days}} dager siden. Trykk her for å se det og bekrefte at du har lest det.$t$),
    ('assignment_follow_up', 'en', $t$An assignment is waiting for you$t$,
     $t$Hi {{name}}! You were given the assignment “{{title}}” {{days}} days ago. Tap here to open it and confirm you have read it.$t$),
    ('new_assignment', 'nb', $t$Nytt oppdrag: «{{title}}»$t$,
     $t${{coordinator}} har gitt deg et nytt oppdrag. Trykk her for å se det.$t$),
    ('new_assignment', 'en', $t$New assignment: “{{title}}”$t$,
     $t${{coordinator}} has given you a new assignment. Tap here to open it.$t$),
    ('honorarium', 'nb', $t$Du nærmer deg honorar$t$,
     $t$Hei {{name}}! Med dette oppdraget har du fått {{count}} oppdrag, og du kan snart ha rett på honorar. Trykk for å lese mer.$t$),
    ('honorarium', 'en', $t$An honorarium is coming up$t$,
     $t$Hi {{name}}! With this assignment you have had {{count}} assignments, and you may soon be eligible for an honorarium. Tap to read more.$t$),
    ('milestone', 'nb', $t$Gratulerer: {{milestone}} aktiviteter!$t$,
     $t$Hei {{name}}! Du har nå registrert {{milestone}} aktiviteter som likeperson. Takk for innsatsen! Trykk for å se statistikken din.$t$),
    ('milestone', 'en', $t$Congratulations: {{milestone}} activities!$t$,
     $t$Hi {{name}}! You have now logged {{milestone}} activities as a peer mentor. Thank you! Tap to see your statistics.$t$),
    ('impact_summary', 'nb', $t$Året ditt som likeperson$t$,
     $t$Hei {{name}}! Oppsummeringen av det du har bidratt med i {{year}} er klar. Trykk her for å se den.$t$),
    ('impact_summary', 'en', $t$Your year as a peer mentor$t$,
     $t$Hi {{name}}! The summary of what you contributed in {{year}} is ready. Tap here to see it.$t$),
    ('availability_change', 'nb', $t${{#lifted}}{{mentor}} er tilgjengelig igjen{{/lifted}}{{^lifted}}{{mentor}} har pause{{/lifted}}$t$,
     $t${{#lifted}}{{mentor}} har avsluttet pausen som startet {{started}}{{#reason}} («{{reason}}»){{/reason}}.{{/lifted}}{{^lifted}}{{mentor}} har satt seg på pause{{#from}} fra {{from}}{{/from}}{{#until}} til {{until}}{{/until}}{{^until}} inntil videre{{/until}}{{#reason}}: «{{reason}}»{{/reason}}.{{/lifted}}$t$),
    ('availability_change', 'en', $t${{#lifted}}{{mentor}} is available again{{/lifted}}{{^lifted}}{{mentor}} is on a break{{/lifted}}$t$,
     $t${{#lifted}}{{mentor}} has ended the break that started {{started}}{{#reason}} (“{{reason}}”){{/reason}}.{{/lifted}}{{^lifted}}{{mentor}} is taking a break{{#from}} from {{from}}{{/from}}{{#until}} until {{until}}{{/until}}{{^until}} until further notice{{/until}}{{#reason}}: “{{reason}}”{{/reason}}.{{/lifted}}$t$),
    ('overdue_digest', 'nb', $t${{#single}}Et oppdrag er ikke bekreftet{{/single}}{{^single}}{{count}} oppdrag er ikke bekreftet{{/single}}$t$,
     $t${{#single}}{{mentor}} har ikke bekreftet oppdraget «{{title}}» etter {{days}} dager.{{/single}}{{^single}}Ikke bekreftet etter {{days}} dager: {{#cases}}{{^first}}{{#last}}{{#more}}, {{/more}}{{^more}} og {{/more}}{{/last}}{{^last}}, {{/last}}{{/first}}{{mentor}} («{{title}}»){{/cases}}{{#more}} og {{more}} til{{/more}}.{{/single}} Trykk for å følge opp.$t$),
    ('overdue_digest', 'en', $t${{#single}}An assignment is unacknowledged{{/single}}{{^single}}{{count}} assignments are unacknowledged{{/single}}$t$,
     $t${{#single}}{{mentor}} has not acknowledged the assignment “{{title}}” after {{days}} days.{{/single}}{{^single}}Unacknowledged after {{days}} days: {{#cases}}{{^first}}{{#last}}{{#more}}, {{/more}}{{^more}} and {{/more}}{{/last}}{{^last}}, {{/last}}{{/first}}{{mentor}} (“{{title}}”){{/cases}}{{#more}} and {{more}} more{{/more}}.{{/single}} Tap to follow up.$t$);
