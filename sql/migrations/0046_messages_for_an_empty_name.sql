-- 0046: a message to or about someone whose name is empty reads as a sentence.
--
-- users.display_name may be empty (the app writes what it is given), and a new assignment may have no
-- coordinator. The shipped texts then said "Hi !" and "? has given you a new assignment". An empty value is
-- now false to a template's section (the jobs, same release), so the greetings say the name only when
-- there is one ("Hi!"), and a new assignment without a coordinator's name says "You have a new
-- assignment". A mentor named in a coordinator's message is "(no name)" / "(uten navn)" (the jobs).
--
-- Only the shipped defaults change, and only where they still read as shipped: an organization's own texts
-- are its own (the README says how to write the same there).
UPDATE message_templates
   SET body = replace(replace(body, 'Hei {{name}}!', 'Hei{{#name}} {{name}}{{/name}}!'),
                      'Hi {{name}}!', 'Hi{{#name}} {{name}}{{/name}}!')
 WHERE organization_id IS NULL
   AND scenario IN ('inactivity', 'assignment_follow_up', 'honorarium', 'milestone', 'impact_summary')
   AND (body LIKE 'Hei {{name}}!%' OR body LIKE 'Hi {{name}}!%');

UPDATE message_templates
   SET body = '{{#coordinator}}{{coordinator}} har gitt deg et nytt oppdrag.{{/coordinator}}{{^coordinator}}Du har fått et nytt oppdrag.{{/coordinator}} Trykk her for å se det.'
 WHERE organization_id IS NULL AND scenario = 'new_assignment' AND language = 'nb'
   AND body = '{{coordinator}} har gitt deg et nytt oppdrag. Trykk her for å se det.';

UPDATE message_templates
   SET body = '{{#coordinator}}{{coordinator}} has given you a new assignment.{{/coordinator}}{{^coordinator}}You have a new assignment.{{/coordinator}} Tap here to open it.'
 WHERE organization_id IS NULL AND scenario = 'new_assignment' AND language = 'en'
   AND body = '{{coordinator}} has given you a new assignment. Tap here to open it.';
