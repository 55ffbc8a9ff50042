-- 0019: "1 dager", "1 days". A threshold of one day is allowed (0009), and the shipped texts then said
-- "Det er 1 dager siden" and "It's been 1 days". The scenarios that count days get a flag, one_day (days
-- is exactly 1), and the shipped texts choose the word with it. An organization's own texts are left as
-- they are written (they may use the flag from now on).
INSERT INTO message_template_variables (scenario, name, kind, description) VALUES
    ('inactivity',           'one_day', 'flag', 'days is exactly 1'),
    ('assignment_follow_up', 'one_day', 'flag', 'days is exactly 1'),
    ('overdue_digest',       'one_day', 'flag', 'days is exactly 1');

UPDATE message_templates
   SET body = replace(body, '{{days}} dager', '{{days}} {{#one_day}}dag{{/one_day}}{{^one_day}}dager{{/one_day}}'),
       updated_at = now()
 WHERE organization_id IS NULL AND language = 'nb'
   AND scenario IN ('inactivity', 'assignment_follow_up', 'overdue_digest');

UPDATE message_templates
   SET body = replace(body, '{{days}} days', '{{days}} {{#one_day}}day{{/one_day}}{{^one_day}}days{{/one_day}}'),
       updated_at = now()
 WHERE organization_id IS NULL AND language = 'en'
   AND scenario IN ('inactivity', 'assignment_follow_up', 'overdue_digest');
