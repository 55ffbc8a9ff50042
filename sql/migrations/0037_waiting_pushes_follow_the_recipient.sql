-- 0037: a waiting push follows who its recipient is now, and whose assignment it is.
--
-- A push held for quiet hours, a retry or an outage was written with what the recipient was then: a
-- coordinator's digest names the mentors of their scope and the cases' titles, a pause notice the mentor's
-- reason. It still went out after the recipient had moved to another organization, lost the coordinator
-- role, or lost the mentor from their scope: another organization's people, or people no longer theirs,
-- on their phone. And an assignment given to another mentor still reminded the first one of it (its title
-- may name a client). Now each such change cancels what waits, as deactivation and the other changes of
-- 0024 do (the inbox keeps its rows: the recipient could read them when they were made):
-- * users: a new organization_id or role cancels all of the user's waiting pushes;
-- * coordinator_scopes: a mentor taken out of a coordinator's scope (a row deleted, or changed to another
--   mentor) cancels the coordinator's waiting pause notices about that mentor, and their waiting digests
--   (a digest lists the cases of every mentor in scope);
-- * assignments: a new mentor_id cancels the waiting pushes about the assignment (to the mentor it was for).

CREATE FUNCTION users_cancel_pushes_when_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_of(waiting_notifications(array_agg(n.id), NULL, true), 'the user moved to another organization before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE o.organization_id IS DISTINCT FROM n.organization_id
     HAVING count(*) > 0;
    PERFORM cancel_pushes_of(waiting_notifications(array_agg(n.id), NULL, true), 'the user''s role changed before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE o.organization_id IS NOT DISTINCT FROM n.organization_id AND o.role IS DISTINCT FROM n.role
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER users_moved_cancel AFTER UPDATE ON users
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION users_cancel_pushes_when_moved();

CREATE FUNCTION coordinator_scopes_cancel_pushes_when_narrowed() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    coordinators uuid[];
    mentors uuid[];
BEGIN
    -- Only pairs that are out of scope now (an update may have kept one).
    SELECT array_agg(l.coordinator_id), array_agg(l.mentor_id) INTO coordinators, mentors
      FROM (SELECT DISTINCT o.coordinator_id, o.mentor_id FROM old_rows o
             WHERE NOT EXISTS (SELECT 1 FROM coordinator_scopes s WHERE s.coordinator_id = o.coordinator_id AND s.mentor_id = o.mentor_id)) l;
    IF coordinators IS NULL THEN RETURN NULL; END IF;
    PERFORM cancel_pushes_of(array_agg(n.id), 'the mentor left the coordinator''s scope before the push went out')
       FROM unnest(coordinators, mentors) l(coordinator_id, mentor_id)
       JOIN availability_pauses p ON p.mentor_id = l.mentor_id
       JOIN notifications n ON n.subject = 'pause:' || p.id AND n.user_id = l.coordinator_id AND n.category = 'availability_change'
     HAVING count(*) > 0;
    PERFORM cancel_pushes_of(waiting_notifications(coordinators, ARRAY['overdue_digest'], true),
                             'the coordinator''s scope changed before the digest went out');
    RETURN NULL;
END $$;
CREATE TRIGGER coordinator_scopes_delete_cancel AFTER DELETE ON coordinator_scopes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION coordinator_scopes_cancel_pushes_when_narrowed();
CREATE TRIGGER coordinator_scopes_update_cancel AFTER UPDATE ON coordinator_scopes
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION coordinator_scopes_cancel_pushes_when_narrowed();

CREATE FUNCTION assignments_cancel_pushes_when_reassigned() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM cancel_pushes_about(array_agg('assignment:' || n.id), 'the assignment was given to another mentor before the push went out')
       FROM new_rows n JOIN old_rows o ON o.id = n.id
      WHERE o.mentor_id IS DISTINCT FROM n.mentor_id
     HAVING count(*) > 0;
    RETURN NULL;
END $$;
CREATE TRIGGER assignments_reassigned_cancel AFTER UPDATE ON assignments
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION assignments_cancel_pushes_when_reassigned();
