-- 0023: a section nested in a section of the same name is refused when a template is saved.
--
-- The renderer looks a name up through every enclosing section, so {{#cases}} inside {{#cases}} renders
-- the whole list again for every item: sixty such levels in 1,200 characters are 3^60 renders, which hung
-- overdue-digest (and the load-time check of the template) for every organization. The jobs refuse rows
-- saved before this for their organization only. The function is 0020's with that one check added.

CREATE OR REPLACE FUNCTION message_template_problem(p_scenario text, p_text text) RETURNS text LANGUAGE plpgsql STABLE AS $$
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
        IF NOT EXISTS (SELECT FROM message_template_variables v WHERE v.scenario = p_scenario AND v.name = tag_name) THEN
            SELECT coalesce(string_agg(v.name, ', ' ORDER BY v.name), 'none') INTO known
              FROM message_template_variables v WHERE v.scenario = p_scenario;
            RETURN format('{{%s}}: %s is not a variable of %s (its variables: %s)', tag, tag_name, p_scenario, known);
        END IF;
        IF sigil IN ('#', '^') THEN
            IF tag_name = ANY(open_sections) THEN
                RETURN format('{{%s}} inside {{#%s}}: a section may not be nested in itself (a list would be rendered again for every item, at every level)', tag, tag_name);
            END IF;
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
